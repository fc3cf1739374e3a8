package transfers

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ImportHeader is the first line of an import file.
const ImportHeader = "id,from,to,amount"

// MaxImportID is the longest row id or batch id of an import, in bytes.
const MaxImportID = 255

// ImportRow is one row of an import file: a transfer and the row's own id.
type ImportRow struct {
	// Line is the row's line in the file (the header is line 1).
	Line     int
	ID       string
	From, To string
	Amount   int64
}

// LineError is a malformed line of an import file.
type LineError struct {
	Line int
	Msg  string
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseImport reads an import file: CSV (RFC 4180, an optional UTF-8 byte
// order mark) whose first line is exactly "id,from,to,amount", then one
// transfer per line. It returns the rows and every malformed line: a
// missing or different header, a line that is not valid CSV or has another
// number of fields than four, an id that is empty, longer than 255 bytes,
// not valid UTF-8, holds a control character or starts or ends with a
// space, an id already used by an earlier line, an account id that the
// service refuses, the same account twice, and an amount that is not a
// positive integer (of cents) that fits in 64 bits. The error is an I/O
// error of r. A file with any malformed line must be applied nowhere (see
// docs/BATCHES.md).
func ParseImport(r io.Reader) ([]ImportRow, []LineError, error) {
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && string(b) == "\uFEFF" {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // counted here, for a clearer message
	var (
		rows   []ImportRow
		bad    []LineError
		seen   = map[string]int{} // row id -> line
		header = true
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			bad = append(bad, LineError{pe.Line, "not valid CSV: " + pe.Err.Error()})
			header = false
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		line, _ := cr.FieldPos(0)
		if header {
			header = false
			if got := strings.Join(rec, ","); got != ImportHeader {
				bad = append(bad, LineError{line, fmt.Sprintf("the header must be %q, got %q", ImportHeader, bounded(got))})
			}
			continue
		}
		row, msgs := parseRow(line, rec)
		// Ids are checked for duplicates on malformed lines too, so
		// that the fixed file has no surprise left.
		if len(rec) == 4 && CheckImportID(row.ID) == "" {
			if first, dup := seen[row.ID]; dup {
				msgs = append(msgs, fmt.Sprintf("id %q already used on line %d", row.ID, first))
			} else {
				seen[row.ID] = line
			}
		}
		if len(msgs) > 0 {
			bad = append(bad, LineError{line, strings.Join(msgs, "; ")})
			continue
		}
		rows = append(rows, row)
	}
	if header {
		bad = append(bad, LineError{1, fmt.Sprintf("the file is empty; its first line must be %q", ImportHeader)})
	}
	return rows, bad, nil
}

// parseRow checks one line's fields and returns the row, or what is wrong
// with it.
func parseRow(line int, rec []string) (ImportRow, []string) {
	if len(rec) != 4 {
		return ImportRow{}, []string{fmt.Sprintf("%d fields, want 4 (%s)", len(rec), ImportHeader)}
	}
	row := ImportRow{Line: line, ID: rec[0], From: rec[1], To: rec[2]}
	var msgs []string
	if msg := CheckImportID(row.ID); msg != "" {
		msgs = append(msgs, "id: "+msg)
	}
	if !validAccountID(row.From) {
		msgs = append(msgs, fmt.Sprintf("from %q: %s", bounded(row.From), invalidIDDetail))
	}
	if !validAccountID(row.To) {
		msgs = append(msgs, fmt.Sprintf("to %q: %s", bounded(row.To), invalidIDDetail))
	}
	if row.From == row.To && validAccountID(row.From) {
		msgs = append(msgs, "from and to are the same account")
	}
	amount, err := strconv.ParseInt(rec[3], 10, 64)
	switch {
	case err != nil:
		msgs = append(msgs, fmt.Sprintf("amount %q is not an integer number of cents (64 bits)", bounded(rec[3])))
	case amount <= 0:
		msgs = append(msgs, fmt.Sprintf("amount %d is not positive", amount))
	}
	row.Amount = amount
	return row, msgs
}

// CheckImportID returns what is wrong with a row id or a batch id, or ""
// when it is valid: 1 to 255 bytes of UTF-8 without control characters,
// neither starting nor ending with a space.
func CheckImportID(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > MaxImportID:
		return fmt.Sprintf("%d bytes, the limit is %d", len(id), MaxImportID)
	case !utf8.ValidString(id):
		return "not valid UTF-8"
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return "holds a control character"
	case strings.TrimSpace(id) != id:
		return "starts or ends with a space"
	}
	return ""
}
