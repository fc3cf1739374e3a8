package transfers_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

func TestParseImport(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   string
		rows []transfers.ImportRow
		bad  map[int]string // line -> part of its message
	}{
		{"Valid", "id,from,to,amount\nr1,a,b,5\n\"r 2\",b,a,+7\n",
			[]transfers.ImportRow{{Line: 2, ID: "r1", From: "a", To: "b", Amount: 5}, {Line: 3, ID: "r 2", From: "b", To: "a", Amount: 7}}, nil},
		{"ByteOrderMarkAndCRLF", "\uFEFFid,from,to,amount\r\nr1,a,b,5\r\n",
			[]transfers.ImportRow{{Line: 2, ID: "r1", From: "a", To: "b", Amount: 5}}, nil},
		{"HeaderOnly", "id,from,to,amount\n", nil, nil},
		{"Empty", "", nil, map[int]string{1: "empty"}},
		{"WrongHeader", "id,to,from,amount\nr1,a,b,5\n", []transfers.ImportRow{{Line: 2, ID: "r1", From: "a", To: "b", Amount: 5}},
			map[int]string{1: "header"}},
		{"Malformed", strings.Join([]string{
			"id,from,to,amount",
			"r1,a,b,5",                     // 2: fine
			"r2,a,b",                       // 3: three fields
			",a,b,5",                       // 4: empty id
			"r1,a,b,6",                     // 5: duplicate id
			"r5,a,b,1.5",                   // 6: not an integer
			"r6,a,b,0",                     // 7: not positive
			"r7,a,b,-3",                    // 8: negative
			"r8,a,a,5",                     // 9: same account
			"r9,a b,b,5",                   // 10: invalid account id
			"r10,a,b,99999999999999999999", // 11: past 64 bits
			" r11,a,b,5",                   // 12: id with a space
			"r12,a,b,5,x",                  // 13: five fields
			`r13,"a,b,5`,                   // 14: not valid CSV
		}, "\n") + "\n",
			[]transfers.ImportRow{{Line: 2, ID: "r1", From: "a", To: "b", Amount: 5}},
			map[int]string{3: "3 fields", 4: "id: empty", 5: "already used on line 2", 6: "not an integer", 7: "not positive",
				8: "not positive", 9: "same account", 10: "from \"a b\"", 11: "64 bits", 12: "space", 13: "5 fields", 14: "not valid CSV"}},
		{"DuplicateOfAMalformedLine", "id,from,to,amount\nr1,a,a,5\nr1,a,b,5\n", nil,
			map[int]string{2: "same account", 3: "already used on line 2"}},
		{"LongID", "id,from,to,amount\n" + strings.Repeat("x", 256) + ",a,b,1\n", nil, map[int]string{2: "256 bytes"}},
		{"ControlInID", "id,from,to,amount\n\"r\x01\",a,b,1\n", nil, map[int]string{2: "control"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rows, bad, err := transfers.ParseImport(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rows, tt.rows) {
				t.Errorf("rows = %+v, want %+v", rows, tt.rows)
			}
			got := map[int]string{}
			for _, e := range bad {
				got[e.Line] = e.Msg
			}
			if len(got) != len(tt.bad) || len(bad) != len(tt.bad) {
				t.Errorf("malformed lines = %v, want lines %v", bad, tt.bad)
			}
			for line, want := range tt.bad {
				if !strings.Contains(got[line], want) {
					t.Errorf("line %d: %q, want it to say %q", line, got[line], want)
				}
			}
		})
	}
}
