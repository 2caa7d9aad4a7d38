// Command previewsrv is a dev server for the tests of previews (paddock
// port, the web page's preview links), run inside a box: it serves a page
// whose script echoes a message through a WebSocket, the request's
// cookies and host, and a WebSocket echo.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"

	"github.com/coder/websocket"
)

const page = `<!doctype html><title>preview</title>
<p id="served">served from the box</p><p id="echo">waiting</p>
<script>
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onopen = () => ws.send("ping through the preview");
ws.onmessage = (m) => { document.getElementById("echo").textContent = "echo: " + m.data; };
ws.onerror = () => { document.getElementById("echo").textContent = "websocket failed"; };
</script>`

func main() {
	port := flag.Int("port", 5173, "port on loopback")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("GET /request", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s\ncookie=%s\nkey=%s\n", r.Host, r.Header.Get("Cookie"), r.Header.Get("X-Paddock-Key"))
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, b); err != nil {
				return
			}
		}
	})
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
