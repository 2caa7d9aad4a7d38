package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/version"
)

// The OpenAPI document of the API (GET /v1/openapi.json) is made from
// Routes and the Go types of their bodies, so it cannot drift from what
// the server answers: a schema is the JSON the type marshals to. The
// compatibility promise (docs/API.md): within /v1/, fields and routes are
// only added; a field or route is removed or changes meaning only under
// a new version prefix, and both are served for a release in between.

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
)

// OpenAPI is the document, as JSON.
func OpenAPI() []byte {
	openAPIOnce.Do(func() {
		b, err := json.MarshalIndent(buildOpenAPI(), "", "  ")
		if err != nil {
			panic(err) // maps and strings only: cannot fail
		}
		openAPIDoc = b
	})
	return openAPIDoc
}

func openAPIRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI())
	})
}

type obj = map[string]any

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

func buildOpenAPI() obj {
	g := &schemaGen{defs: obj{}}
	paths := obj{}
	for _, rt := range Routes {
		op := obj{
			"summary":         rt.Summary,
			"operationId":     operationID(rt),
			"x-paddock-scope": scopeName(rt.Scope),
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path(), -1) {
			params = append(params, obj{"name": m[1], "in": "path", "required": true, "schema": obj{"type": "string"}})
		}
		for _, q := range rt.Query {
			params = append(params, obj{"name": q.Name, "in": "query", "description": q.Doc, "schema": obj{"type": q.Type}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.Request != nil {
			media := obj{"schema": g.schema(reflect.TypeOf(rt.Request))}
			if rt.Example != nil {
				media["example"] = rt.Example
			}
			op["requestBody"] = obj{"required": true, "content": obj{"application/json": media}}
		}
		ok := obj{"description": "OK"}
		switch {
		case rt.Produces == "":
			if rt.Response != nil {
				ok["content"] = obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.Response))}}
			}
		case rt.Response != nil:
			ok["content"] = obj{rt.Produces: obj{"schema": g.schema(reflect.TypeOf(rt.Response))}}
		default:
			ok["content"] = obj{rt.Produces: obj{"schema": obj{"type": "string"}}}
		}
		op["responses"] = obj{"200": ok, "default": obj{"$ref": "#/components/responses/Error"}}
		item, _ := paths[rt.Path()].(obj)
		if item == nil {
			item = obj{}
			paths[rt.Path()] = item
		}
		item[strings.ToLower(rt.Method())] = op
	}
	g.defs["Error"] = obj{"type": "object", "required": []string{"error"}, "properties": obj{
		"error": obj{"type": "string", "description": "what went wrong and what to do"},
		"kind":  obj{"type": "string", "enum": []string{"not_found", "conflict", "invalid", "forbidden", "unauthorized", "unavailable", "limit", "command_not_found", "command_cannot_run", "internal"}},
	}}
	return obj{
		"openapi": "3.1.0",
		"info": obj{"title": "paddock Runner API", "version": version.String(),
			"description": "The Runner's HTTP API: on its unix socket (the caller is who the kernel says), and on its web listener with an API token (Authorization: Bearer pdk_at_…), within the token's scope (x-paddock-scope: read < drive < operate; socket: the socket only). Within /v1/ fields and routes are only added (docs/API.md)."},
		"paths": paths,
		"components": obj{
			"schemas":         g.defs,
			"responses":       obj{"Error": obj{"description": "An error", "content": obj{"application/json": obj{"schema": obj{"$ref": "#/components/schemas/Error"}}}}},
			"securitySchemes": obj{"token": obj{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{obj{"token": []string{}}},
	}
}

func scopeName(s Scope) string {
	if s == ScopeSocket {
		return "socket"
	}
	return string(s)
}

// operationID is the route's method and path in camel case, e.g.
// getSessionsRefWait.
func operationID(rt Route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.Method()))
	for _, part := range strings.FieldsFunc(strings.TrimPrefix(rt.Path(), "/v1/"), func(r rune) bool { return r == '/' || r == '{' || r == '}' || r == '_' || r == '.' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// schemaGen turns Go types into JSON Schemas, named structs into
// components.
type schemaGen struct {
	defs obj
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
	marshalT = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
)

func (g *schemaGen) schema(t reflect.Type) obj {
	switch {
	case t == timeType:
		return obj{"type": "string", "format": "date-time"}
	case t == rawType:
		return obj{}
	case t.Kind() == reflect.Pointer:
		return g.schema(t.Elem())
	case t.Kind() != reflect.Struct && t.Implements(marshalT):
		return obj{} // its own JSON
	}
	switch t.Kind() {
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number"}
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return obj{"type": "string", "contentEncoding": "base64"}
		}
		return obj{"type": []string{"array", "null"}, "items": g.schema(t.Elem())}
	case reflect.Map:
		return obj{"type": []string{"object", "null"}, "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := defName(t)
		if name == "" {
			return g.structSchema(t)
		}
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = obj{} // a placeholder while it is made: recursive types
			if t.Implements(marshalT) || reflect.PointerTo(t).Implements(marshalT) {
				g.defs[name] = obj{"description": "its own JSON form"}
			} else {
				g.defs[name] = g.structSchema(t)
			}
		}
		return obj{"$ref": "#/components/schemas/" + name}
	case reflect.Interface:
		return obj{}
	}
	return obj{}
}

// defName is a struct's component name: its package's last element and
// its name (Session_Session reads badly: session.Session is "Session").
func defName(t reflect.Type) string {
	if t.Name() == "" {
		return ""
	}
	pkg := t.PkgPath()
	pkg = pkg[strings.LastIndex(pkg, "/")+1:]
	if strings.EqualFold(pkg, t.Name()) || pkg == "api" {
		return t.Name()
	}
	return strings.ToUpper(pkg[:1]) + pkg[1:] + t.Name()
}

func (g *schemaGen) structSchema(t reflect.Type) obj {
	props := obj{}
	var required []string
	g.fields(t, props, &required)
	s := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		s["required"] = required
	}
	return s
}

func (g *schemaGen) fields(t reflect.Type, props obj, required *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") && f.Type.Kind() != reflect.Pointer {
			*required = append(*required, name)
		}
	}
}
