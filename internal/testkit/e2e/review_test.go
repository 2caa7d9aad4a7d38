package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// waitText waits until the page's element sel shows want.
func waitText(t *testing.T, ctx context.Context, sel, want string, d time.Duration) string {
	t.Helper()
	var text string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		var err error
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`) || {innerText: ""}).innerText`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, want) {
			return text
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the page's %s never showed %q: %q", sel, want, text)
	return ""
}

// jsString quotes s for a script: JSON's quoting is JavaScript's.
func jsString(s string) string {
	return "`" + strings.NewReplacer("\\", "\\\\", "`", "\\`", "$", "\\$").Replace(s) + "`"
}

// TestWebReviewInChromium: a clone session's page shows its diff beside
// the terminal; a comment written on a line is sent as one message and is
// the next user message upstream, with the file, the line and the words;
// the turn it starts commits a new file and the diff shows it without a
// reload; merge from the page fast-forwards the owner's branch, and the
// owner's tree has the work.
func TestWebReviewInChromium(t *testing.T) {
	chromium := testenv.LookPath(t, "chromium")
	e := newEnv(t)
	person := gitPerson(t)
	ws := ownedRepo(t)
	name := "review"
	e.pdAs(person, "run", "-d", "--name", name, "--backend", "local", "--workspace", ws, "--clone")
	defer e.pdRun("rm", "-f", name)
	e.waitScreen(name, promptReady, 60*time.Second)
	// The box also writes markup where the page shows text: a file's lines
	// and its name.
	e.pd("exec", name, "--", "sh", "-c", "cd /workspace && echo 'hello review' > main.txt && git commit -qam 'edit by exec' && "+
		`printf '<img src=x onerror="document.title=1">\n' > '<b onmouseover=x>.html'`)

	login := strings.TrimSpace(e.pd("web"))
	base := login[:strings.Index(login, "/login")]
	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="`+name+`"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/"+name), chromedp.WaitVisible(chromedp.CSS(".xterm-rows")),
		chromedp.WaitVisible(chromedp.CSS(`#diff .file[data-path="main.txt"] tr.line.add`))); err != nil {
		t.Fatalf("the review: %v", err)
	}
	waitText(t, ctx, `#diff .file[data-path="main.txt"]`, "+hello review", 10*time.Second)
	waitText(t, ctx, "#branch", "paddock/"+name+" +1", 10*time.Second)
	waitTerminal(t, ctx, "bypass permissions on") // the terminal beside it
	waitText(t, ctx, `#diff`, `+<img src=x onerror="document.title=1">`, 10*time.Second)
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#diff img, #diff b").length`)); err != nil || n != 0 {
		t.Fatalf("the box's markup became elements of the page: %d %v", n, err)
	}
	waitText(t, ctx, `#diff`, "<b onmouseover=x>.html", time.Second)

	// A comment on the added line; its words start the fake upstream's
	// scripted turn, which commits a new file.
	e.fake.SetSteps([]fakeapi.Step{
		{Name: "Bash", Input: map[string]any{"command": "cd /workspace && echo fixed > fixed.txt && git add fixed.txt && git commit -qm 'fix from review'", "description": "commit the fix"}},
	})
	defer e.fake.SetSteps(nil)
	comment := "COMMENT-4411 " + fakeapi.StepsKeyword + " say why, then add fixed.txt"
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#diff .file[data-path="main.txt"] tr.line.add`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff tr.editing textarea`)),
		chromedp.SetValue(chromedp.CSS(`#diff tr.editing textarea`), comment),
		chromedp.Click(chromedp.CSS(`#diff tr.editing button.addComment`)),
		chromedp.WaitVisible(chromedp.CSS(`#comments`))); err != nil {
		t.Fatalf("write a comment: %v", err)
	}
	waitText(t, ctx, "#commentCount", "1 comment", 5*time.Second)
	screenshot(t, ctx, "web-review-comment.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#sendComments`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#reviewStatus", "Sent: claude took your comments", 40*time.Second)
	var got string
	for deadline := time.Now().Add(30 * time.Second); got == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, r := range e.fake.Requests() {
			if w := r.UserWords(); strings.Contains(w, "COMMENT-4411") {
				got = w
				break
			}
		}
	}
	for _, want := range []string{"Review comments on your change (1)", "main.txt, line 1:\n> +hello review\n" + comment} {
		if !strings.Contains(got, want) {
			t.Fatalf("the message upstream lacks %q:\n%s", want, got)
		}
	}
	e.waitScreen(name, fakeapi.StepsDone, 60*time.Second)

	// The turn's commit shows without a reload.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#diff .file[data-path="fixed.txt"]`))); err != nil {
		t.Fatalf("the new commit never showed: %v", err)
	}
	waitText(t, ctx, "#branch", "+2", 10*time.Second)
	screenshot(t, ctx, "web-review.png")

	// Merge from the page: a fast-forward of the owner's checked-out branch.
	head := strings.TrimSpace(e.pd("exec", name, "--", "git", "-C", "/workspace", "rev-parse", "HEAD"))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#merge`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#reviewStatus", "Merged into main: fast-forward", 60*time.Second)
	waitText(t, ctx, "#reviewStatus", "the working tree is updated", time.Second)
	if got := strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD")); got != head {
		t.Fatalf("the owner's HEAD after the page's merge: %s, want %s", got, head)
	}
	for f, want := range map[string]string{"main.txt": "hello review\n", "fixed.txt": "fixed\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, f)); string(b) != want {
			t.Fatalf("%s after the merge: %q", f, b)
		}
	}
	waitText(t, ctx, "#branch", "merged", 10*time.Second)
	allOwners(t, ws)
	screenshot(t, ctx, "web-review-merged.png")
}
