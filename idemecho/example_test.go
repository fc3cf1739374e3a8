package idemecho_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemecho"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
	"github.com/labstack/echo/v4"
)

// An echo route protected by idemhttp: the retry of a transfer is replayed.
func Example() {
	store := memstore.New() // sqlitestore or pgstore in a real service
	guard, _ := idem.New(store, nil)
	mw, _ := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})

	e := echo.New()
	e.HideBanner = true
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // your authentication
		return func(c echo.Context) error {
			idemecho.SetPrincipal(c, "user:42")
			return next(c)
		}
	})
	e.POST("/transfers", func(c echo.Context) error {
		tx, _ := memstore.TxFrom(c.Request().Context()) // the transaction that records the key
		tx.Set("transfer", "10 from alice to bob")
		return c.JSON(http.StatusCreated, map[string]int{"id": 1})
	}, idemecho.Middleware(mw))
	srv := httptest.NewServer(e)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/transfers", strings.NewReader(`{"amount":10}`))
		req.Header.Set("Idempotency-Key", "intent-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// 201 {"id":1} replayed: false
	// 201 {"id":1} replayed: true
}
