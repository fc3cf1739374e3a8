package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pb33f/go-yaml"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"
)

// The OpenAPI document is read with github.com/pb33f/libopenapi: it reads
// OpenAPI 3.0 and 3.1 (kin-openapi reads 3.0 only), JSON or YAML, resolves
// local $refs and tolerates the circular schemas that large public
// documents have. It builds the whole model, schemas included, and still
// lists a generated 3000-operation document in about a second of one core
// (BenchmarkOpenAPIInventory; docs/CHECK.md has the figures for published
// documents). It is used here only, never in the standard-library-only
// packages.

// apiOperation is one state-changing operation of an OpenAPI document, as
// the inventory lists it.
type apiOperation struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	OperationID string `json:"operation_id,omitempty"`
	// KeyHeader is true when the operation declares the key header as a
	// header parameter (its own, a path-level one, or a $ref'd one), and
	// KeyRequired when that parameter is required.
	KeyHeader   bool `json:"key_header"`
	KeyRequired bool `json:"key_required"`
	// Declares409 and Declares422 say whether those answers are declared.
	Declares409 bool `json:"declares_409"`
	Declares422 bool `json:"declares_422"`
	// Example is true when the request body has an example (on its
	// media type, or on that media type's schema).
	Example bool `json:"example"`
	// Note is the inventory's finding on an operation without the key
	// header: "retries may duplicate" for a POST or PATCH, "idempotent by
	// method" for a PUT or DELETE.
	Note string `json:"note,omitempty"`

	// What an audit needs.
	mediaType   string            // the request's media type, "" for none
	body        []byte            // the example, serialized for mediaType
	bodyProblem string            // why there is no usable body, if none
	pathParams  map[string]string // name → example value ("" for none)
	queryParams []apiParam        // required query parameters
	headers     []apiParam        // required header parameters but the key
	effectsURL  string            // x-idem-effects-url
	effectsPath string            // x-idem-effects-path
}

// apiParam is a parameter and its example value ("" for none).
type apiParam struct{ name, value string }

// apiDocument is the part of an OpenAPI document the check reads.
type apiDocument struct {
	Version    string          `json:"openapi"`
	Title      string          `json:"title,omitempty"`
	All        int             `json:"operations_total"`
	Operations []*apiOperation `json:"operations"`
}

// stateChanging is the methods the inventory lists, in the order it
// lists a path's operations.
var stateChanging = []string{"POST", "PUT", "PATCH", "DELETE"}

// loadOpenAPI reads the OpenAPI 3.0 or 3.1 document at path and lists its
// state-changing operations; keyHeader is the key's header name. Every
// error is a usage error.
func loadOpenAPI(path, keyHeader string) (*apiDocument, error) {
	bad := func(format string, args ...any) error {
		return usageError{"check: --openapi " + path + ": " + fmt.Sprintf(format, args...)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Sprintf("check: --openapi: %v", err)}
	}
	abs, _ := filepath.Abs(path)
	cfg := datamodel.NewDocumentConfiguration()
	// $refs to files beside the document are followed; remote ones never
	// (the check fetches nothing the command line did not name).
	cfg.AllowFileReferences = true
	cfg.AllowRemoteReferences = false
	cfg.BasePath = filepath.Dir(abs)
	cfg.SpecFilePath = abs
	doc, err := libopenapi.NewDocumentWithConfiguration(b, cfg)
	switch {
	case err != nil && strings.Contains(err.Error(), "spec type not supported"):
		return nil, bad("not an OpenAPI 3.0 or 3.1 document (no \"openapi: 3.x\" field)")
	case err != nil:
		return nil, bad("not an OpenAPI document: %v", firstLine(err))
	}
	info := doc.GetSpecInfo()
	if info == nil {
		return nil, bad("not an OpenAPI document")
	}
	switch info.SpecFormat {
	case datamodel.OAS3, datamodel.OAS31:
	case datamodel.OAS2:
		return nil, bad("a Swagger 2.0 document: --openapi reads OpenAPI 3.0 and 3.1 (convert it first)")
	default:
		return nil, bad("not an OpenAPI 3.0 or 3.1 document (no \"openapi: 3.x\" field)")
	}
	model, err := doc.BuildV3Model()
	if model == nil {
		if err == nil {
			err = errors.New("no model")
		}
		return nil, bad("cannot read it: %v", firstLine(err))
	}
	// An error with a model is a circular schema or an unresolved $ref
	// somewhere in the document: the operations are still listed, and an
	// operation whose example cannot be read says so.
	out := &apiDocument{Version: info.Version}
	if model.Model.Info != nil {
		out.Title = model.Model.Info.Title
	}
	if model.Model.Paths == nil {
		return out, nil
	}
	for p, item := range model.Model.Paths.PathItems.FromOldest() {
		if item == nil {
			continue
		}
		ops := map[string]*v3.Operation{"POST": item.Post, "PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete}
		for _, op := range []*v3.Operation{item.Get, item.Head, item.Options, item.Trace, item.Query} {
			if op != nil {
				out.All++
			}
		}
		for _, m := range stateChanging {
			if op := ops[m]; op != nil {
				out.All++
				out.Operations = append(out.Operations, newAPIOperation(m, p, item, op, keyHeader))
			}
		}
	}
	return out, nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func newAPIOperation(method, path string, item *v3.PathItem, op *v3.Operation, keyHeader string) *apiOperation {
	o := &apiOperation{Method: method, Path: path, OperationID: op.OperationId, pathParams: map[string]string{}}
	// Operation parameters override path-level ones of the same name and
	// location.
	params := map[string]*v3.Parameter{}
	var order []string
	for _, list := range [][]*v3.Parameter{item.Parameters, op.Parameters} {
		for _, prm := range list {
			if prm == nil {
				continue
			}
			id := strings.ToLower(prm.In) + " " + prm.Name
			if prm.In == "header" {
				id = "header " + strings.ToLower(prm.Name)
			}
			if _, ok := params[id]; !ok {
				order = append(order, id)
			}
			params[id] = prm
		}
	}
	for _, id := range order {
		prm := params[id]
		required := prm.Required != nil && *prm.Required
		switch prm.In {
		case "header":
			if strings.EqualFold(prm.Name, keyHeader) {
				o.KeyHeader, o.KeyRequired = true, required
			} else if required {
				o.headers = append(o.headers, apiParam{prm.Name, paramExample(prm)})
			}
		case "path":
			o.pathParams[prm.Name] = paramExample(prm)
		case "query":
			if required {
				o.queryParams = append(o.queryParams, apiParam{prm.Name, paramExample(prm)})
			}
		}
	}
	if op.Responses != nil && op.Responses.Codes != nil {
		_, o.Declares409 = op.Responses.Codes.Get("409")
		_, o.Declares422 = op.Responses.Codes.Get("422")
	}
	o.requestBody(op.RequestBody)
	switch {
	case o.KeyHeader:
	case method == "POST" || method == "PATCH":
		o.Note = "retries may duplicate"
	default:
		o.Note = "idempotent by method"
	}
	o.effectsURL = extensionString(op.Extensions, "x-idem-effects-url")
	o.effectsPath = extensionString(op.Extensions, "x-idem-effects-path")
	return o
}

// requestBody finds the request's example: on the JSON media type if
// there is one, else on the first; on the media type, else on its schema.
func (o *apiOperation) requestBody(rb *v3.RequestBody) {
	if rb == nil || rb.Content == nil || rb.Content.Len() == 0 {
		o.bodyProblem = "no request body"
		return
	}
	var mt *v3.MediaType
	for name, m := range rb.Content.FromOldest() {
		if m == nil {
			continue
		}
		if mt == nil || (isJSONMedia(name) && !isJSONMedia(o.mediaType)) {
			o.mediaType, mt = name, m
		}
	}
	if mt == nil {
		o.bodyProblem = "no request body"
		return
	}
	var node *yaml.Node
	external := ""
	switch {
	case mt.Example != nil:
		node = mt.Example
	case mt.Examples != nil && mt.Examples.Len() > 0:
		for _, ex := range mt.Examples.FromOldest() {
			if ex == nil {
				continue
			}
			if ex.Value != nil {
				node = ex.Value
				break
			}
			if ex.DataValue != nil {
				node = ex.DataValue
				break
			}
			if ex.ExternalValue != "" && external == "" {
				external = ex.ExternalValue
			}
		}
	}
	if node == nil && mt.Schema != nil {
		node = schemaExample(mt.Schema)
	}
	o.Example = node != nil || external != ""
	switch {
	case node == nil && external != "":
		o.bodyProblem = "the request example is external (" + external + "), which the check does not fetch"
		return
	case node == nil:
		o.bodyProblem = "no request example"
		return
	}
	body, err := encodeExample(o.mediaType, node)
	if err != nil {
		o.bodyProblem = "the request example cannot be sent as " + o.mediaType + ": " + err.Error()
		return
	}
	o.body = body
}

// schemaExample is a schema's example, or the first of its examples.
func schemaExample(sp *base.SchemaProxy) *yaml.Node {
	s := sp.Schema()
	if s == nil {
		return nil
	}
	if s.Example != nil {
		return s.Example
	}
	if len(s.Examples) > 0 {
		return s.Examples[0]
	}
	return nil
}

// paramExample is a parameter's example value as text: its example, its
// first examples entry, or its schema's example.
func paramExample(p *v3.Parameter) string {
	var node *yaml.Node
	switch {
	case p.Example != nil:
		node = p.Example
	case p.Examples != nil && p.Examples.Len() > 0:
		for _, ex := range p.Examples.FromOldest() {
			if ex != nil && ex.Value != nil {
				node = ex.Value
				break
			}
		}
	}
	if node == nil && p.Schema != nil {
		node = schemaExample(p.Schema)
	}
	if node == nil || node.Kind != yaml.ScalarNode {
		return ""
	}
	return node.Value
}

func extensionString(ext *orderedmap.Map[string, *yaml.Node], name string) string {
	if ext == nil {
		return ""
	}
	if n, ok := ext.Get(name); ok && n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

func isJSONMedia(mt string) bool {
	mt, _, _ = strings.Cut(strings.ToLower(mt), ";")
	mt = strings.TrimSpace(mt)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// encodeExample serializes an example for its media type: JSON (members
// in the document's order), a form of flat members, or a string as it is.
func encodeExample(mediaType string, n *yaml.Node) ([]byte, error) {
	mt, _, _ := strings.Cut(strings.ToLower(mediaType), ";")
	switch mt = strings.TrimSpace(mt); {
	case isJSONMedia(mt):
		var b strings.Builder
		if err := nodeJSON(&b, n, 0); err != nil {
			return nil, err
		}
		return []byte(b.String()), nil
	case mt == "application/x-www-form-urlencoded":
		n = unalias(n)
		if n.Kind != yaml.MappingNode {
			return nil, errors.New("a form example must be an object")
		}
		v := url.Values{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			val := unalias(n.Content[i+1])
			if val.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("form member %q is not a plain value", n.Content[i].Value)
			}
			v.Add(n.Content[i].Value, val.Value)
		}
		return []byte(v.Encode()), nil
	default:
		if n = unalias(n); n.Kind == yaml.ScalarNode {
			return []byte(n.Value), nil
		}
		return nil, errors.New("the check sends JSON, forms and text")
	}
}

func unalias(n *yaml.Node) *yaml.Node {
	for range 64 {
		if n.Kind != yaml.AliasNode || n.Alias == nil {
			break
		}
		n = n.Alias
	}
	return n
}

// nodeJSON writes a YAML node as JSON, keeping the members' order.
func nodeJSON(b *strings.Builder, n *yaml.Node, depth int) error {
	if depth > 100 {
		return errors.New("nested too deep")
	}
	n = unalias(n)
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("empty")
		}
		return nodeJSON(b, n.Content[0], depth+1)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(unalias(n.Content[i]).Value)
			b.Write(k)
			b.WriteByte(':')
			if err := nodeJSON(b, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := nodeJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			v, err := strconv.ParseBool(n.Value)
			if err != nil {
				v = strings.EqualFold(n.Value, "true") || strings.EqualFold(n.Value, "yes") || strings.EqualFold(n.Value, "on")
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			if json.Valid([]byte(n.Value)) {
				b.WriteString(n.Value)
				break
			}
			f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil {
				return fmt.Errorf("number %q", n.Value)
			}
			v, _ := json.Marshal(f)
			b.Write(v)
		default:
			v, _ := json.Marshal(n.Value)
			b.Write(v)
		}
	default:
		return fmt.Errorf("unexpected YAML node kind %d", n.Kind)
	}
	return nil
}
