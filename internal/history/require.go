package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DirEnv names the directory Require writes its visualizations to; when it
// is unset, they go to a t.TempDir (removed after the test; set the
// variable to keep them).
const DirEnv = "IDEM_HISTORY_DIR"

// Require checks the operations r recorded (see Check) and fails t when
// they are not linearizable. On a failure it writes porcupine's visualization
// of the history to a file named after the test, in $IDEM_HISTORY_DIR or a
// t.TempDir, and prints its path. It returns the verdict.
func Require(t testing.TB, r *Recorder) Result {
	t.Helper()
	res := Check(r.Ops(), 0)
	if res.Ok {
		t.Logf("history: %s", res)
		return res
	}
	dir := os.Getenv(DirEnv)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("history: %s: %v", DirEnv, err)
		dir = t.TempDir()
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + ".history.html"
	path := filepath.Join(dir, name)
	if err := res.WriteHTML(path); err != nil {
		t.Errorf("history: %s; writing the visualization: %v", res, err)
		return res
	}
	t.Errorf("history: %s; visualization: %s", res, path)
	return res
}
