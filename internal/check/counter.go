package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
)

// URLCounter counts effects with a GET of url through d: the answer must
// be a 200 whose JSON holds a number at path, a dotted path of member
// names and array indexes ("data.total", "items.0.n"); a last element "#"
// counts an array's elements ("items.#"), and an empty path takes the
// whole body as the number. header is sent with the GET.
func URLCounter(d Doer, url string, header http.Header, path string) Counter {
	return func(ctx context.Context) (int64, error) {
		res, err := d.Do(ctx, &Request{Method: http.MethodGet, URL: url, Header: header.Clone()})
		if err != nil {
			return 0, fmt.Errorf("GET %s: %w", url, err)
		}
		if res.Status != http.StatusOK {
			return 0, fmt.Errorf("GET %s: status %d, want 200", url, res.Status)
		}
		n, err := NumberAt(res.Body, path)
		if err != nil {
			return 0, fmt.Errorf("GET %s: %w", url, err)
		}
		return n, nil
	}
}

// NumberAt returns the integer at path in the JSON document doc (see
// URLCounter for the path's form).
func NumberAt(doc []byte, path string) (int64, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("the answer is not JSON: %w", err)
	}
	if path != "" {
		parts := strings.Split(path, ".")
		for i, p := range parts {
			switch c := v.(type) {
			case map[string]any:
				next, ok := c[p]
				if !ok {
					return 0, fmt.Errorf("no member %q at %q", p, strings.Join(parts[:i], "."))
				}
				v = next
			case []any:
				if p == "#" && i == len(parts)-1 {
					return int64(len(c)), nil
				}
				n, err := strconv.Atoi(p)
				if err != nil || n < 0 || n >= len(c) {
					return 0, fmt.Errorf("%q is not an index of the %d-element array at %q", p, len(c), strings.Join(parts[:i], "."))
				}
				v = c[n]
			default:
				return 0, fmt.Errorf("nothing to look %q up in at %q", p, strings.Join(parts[:i], "."))
			}
		}
	}
	num, ok := v.(json.Number)
	if !ok {
		if path == "" {
			return 0, fmt.Errorf("the answer is %s, not a number: give --effects-path to the number in it (for example count, or items.# for an array's length)", jsonKind(v))
		}
		return 0, fmt.Errorf("the value at %q is %s, not a number", path, jsonKind(v))
	}
	return integer(num.String())
}

// integer parses s as an integer, allowing an integral float form.
func integer(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return int64(f), nil
}

// CommandCounter counts effects by running command with sh -c: it must
// exit 0 and print one integer (surrounding space is ignored).
func CommandCounter(command string) Counter {
	return func(ctx context.Context) (int64, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(errOut.String())
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
			if msg != "" {
				err = fmt.Errorf("%w: %s", err, msg)
			}
			return 0, fmt.Errorf("sh -c %q: %w", command, err)
		}
		n, err := integer(out.String())
		if err != nil {
			return 0, fmt.Errorf("sh -c %q printed %q: %w", command, strings.TrimSpace(out.String()), err)
		}
		return n, nil
	}
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
