package galeratest_test

import (
	"testing"

	"github.com/idemkit/idem/internal/servertest"

	"github.com/idemkit/idem/internal/galeratest"
)

// TestCluster checks the harness itself: a write on one node is read on
// another, a killed node rejoins and catches up on what it missed.
func TestCluster(t *testing.T) {
	servertest.Cluster(t)
	c := galeratest.Start(t, 3)
	a, b := c.Open(0), c.Open(2)
	if _, err := a.Exec("CREATE TABLE harness (id INT PRIMARY KEY, v VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec("INSERT INTO harness VALUES (1, 'one')"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := b.QueryRow("SELECT v FROM harness WHERE id = 1").Scan(&v); err != nil || v != "one" {
		t.Fatalf("node 2 reads %q, %v; want one", v, err)
	}
	c.Kill(1)
	c.WaitSynced(2)
	if _, err := a.Exec("INSERT INTO harness VALUES (2, 'two')"); err != nil {
		t.Fatal(err)
	}
	c.Restart(1, 3)
	mid := c.Open(1)
	var n int
	if err := mid.QueryRow("SELECT count(*) FROM harness").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rejoined node counts %d rows, %v; want 2", n, err)
	}
}
