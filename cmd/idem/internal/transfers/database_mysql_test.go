package transfers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every statement mysqlRewrites rewrites is still one of the package's: an
// edit of a statement must come with its MySQL wording.
func TestMySQLRewritesAreCurrent(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "database_mysql.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for from := range mysqlRewrites {
		if !strings.Contains(src.String(), from) {
			t.Errorf("mysqlRewrites rewrites a statement no file of the package has any more: %s", from)
		}
	}
}

func TestTranslatePlaceholders(t *testing.T) {
	q, args, err := translate(`UPDATE accounts SET balance = balance - $1 WHERE id = $2 AND balance >= $1`, []any{5, "a"})
	if err != nil || q != `UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?` || len(args) != 3 || args[0] != 5 || args[1] != "a" || args[2] != 5 {
		t.Errorf("translate = %q %v %v", q, args, err)
	}
	if _, _, err := translate(`SELECT $3`, []any{1}); err == nil {
		t.Errorf("translate of a placeholder without its argument: nil error")
	}
}
