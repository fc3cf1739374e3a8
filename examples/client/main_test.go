package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClient runs the example against the httpserver example, built and
// started as its README says: the first answer is lost, the retry is
// replayed, and alice pays once.
func TestClient(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "httpserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../httpserver").CombinedOutput(); err != nil {
		t.Fatalf("go build ../httpserver: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "-addr", addr, "-db", filepath.Join(dir, "bank.db"))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	base := "http://" + addr
	for i := 0; ; i++ {
		if res, err := http.Get(base + "/balance"); err == nil {
			res.Body.Close()
			break
		}
		if i == 300 {
			t.Fatal("the httpserver example did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var out bytes.Buffer
	if err := run(context.Background(), base, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{": 201 after 2 attempts (replayed: true)", "alice paid 100 cents"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
