package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// planFile is the --plan format: a list of endpoints, each field
// defaulting to the command line's flag.
type planFile struct {
	Endpoints []planEndpoint `json:"endpoints"`
}

type planEndpoint struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	URL    string `json:"url"`
	// Body and Body2: a JSON string is the body's text (or @FILE, relative
	// to the plan's directory); any other JSON value is sent as written.
	Body        json.RawMessage `json:"body"`
	Body2       json.RawMessage `json:"body2"`
	Headers     []string        `json:"headers"`
	Principal2  []string        `json:"principal2"`
	KeyHeader   string          `json:"key_header"`
	KeyOptional *bool           `json:"key_optional"`
	Concurrency int             `json:"concurrency"`
	EffectsURL  string          `json:"effects_url"`
	EffectsPath string          `json:"effects_path"`
	EffectsCmd  string          `json:"effects_cmd"`
}

// loadPlan reads a plan and returns its endpoints, each one's fields
// defaulting to f.
func loadPlan(path string, f checkFlags) ([]checkTarget, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Sprintf("check: --plan: %v", err)}
	}
	format := "JSON"
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		// The same plan in YAML: converted to JSON, then read as JSON, so
		// both formats accept exactly the same fields.
		format = "YAML"
		if b, err = yaml.YAMLToJSON(b); err != nil {
			return nil, usageError{fmt.Sprintf("check: --plan %s: not a YAML plan: %v", path, err)}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p planFile
	if err := dec.Decode(&p); err != nil {
		return nil, usageError{fmt.Sprintf("check: --plan %s: not a %s plan: %v", path, format, err)}
	}
	if len(p.Endpoints) == 0 {
		return nil, usageError{fmt.Sprintf("check: --plan %s: no endpoints", path)}
	}
	dir := filepath.Dir(path)
	var out []checkTarget
	for i, pe := range p.Endpoints {
		name := pe.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		ef := f
		ef.header = append(headerFlags(nil), f.header...)
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&ef.method, pe.Method)
		set(&ef.keyHeader, pe.KeyHeader)
		set(&ef.effectsPath, pe.EffectsPath)
		if pe.EffectsURL != "" || pe.EffectsCmd != "" {
			// The endpoint's own way to count replaces the flags'.
			ef.effectsURL, ef.effectsPath, ef.effectsCmd = pe.EffectsURL, pe.EffectsPath, pe.EffectsCmd
		}
		if pe.Concurrency != 0 {
			ef.concurrency = pe.Concurrency
		}
		if pe.KeyOptional != nil {
			ef.keyOptional = *pe.KeyOptional
		}
		for _, h := range pe.Headers {
			if err := (*headerFlags)(&ef.header).Set(h); err != nil {
				return nil, usageError{fmt.Sprintf("check: --plan endpoint %q: headers: %v", name, err)}
			}
		}
		if pe.Principal2 != nil {
			ef.principal2 = nil
			for _, h := range pe.Principal2 {
				if err := ef.principal2.Set(h); err != nil {
					return nil, usageError{fmt.Sprintf("check: --plan endpoint %q: principal2: %v", name, err)}
				}
			}
		}
		if ef.data, err = planBody(pe.Body, f.data, dir); err != nil {
			return nil, usageError{fmt.Sprintf("check: --plan endpoint %q: body: %v", name, err)}
		}
		if ef.d2, err = planBody(pe.Body2, f.d2, dir); err != nil {
			return nil, usageError{fmt.Sprintf("check: --plan endpoint %q: body2: %v", name, err)}
		}
		t, err := ef.target(name, pe.URL)
		if err != nil {
			return nil, err
		}
		// The plan's headers replace the flags' of the same name.
		for name, v := range headers(pe.Headers) {
			t.Header[name] = v
		}
		out = append(out, t)
	}
	return out, nil
}

// planBody returns a plan's body as a -d value: a JSON string as it is
// (an @FILE relative to dir), any other JSON value compacted; dflt when
// the plan gives none.
func planBody(raw json.RawMessage, dflt, dir string) (string, error) {
	if raw == nil {
		return dflt, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if name, ok := strings.CutPrefix(s, "@"); ok && !filepath.IsAbs(name) {
			s = "@" + filepath.Join(dir, name)
		}
		return s, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}
