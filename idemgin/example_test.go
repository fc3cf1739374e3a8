package idemgin_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgin"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// A gin route protected by idemhttp: the retry of a transfer is replayed.
func Example() {
	gin.SetMode(gin.ReleaseMode)
	store := memstore.New() // sqlitestore or pgstore in a real service
	guard, _ := idem.New(store, nil)
	mw, _ := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})

	r := gin.New()
	r.Use(func(c *gin.Context) { idemgin.SetPrincipal(c, "user:42") }) // your authentication
	r.POST("/transfers", idemgin.Middleware(mw), func(c *gin.Context) {
		tx, _ := memstore.TxFrom(c.Request.Context()) // the transaction that records the key
		tx.Set("transfer", "10 from alice to bob")
		c.JSON(http.StatusCreated, gin.H{"id": 1})
	})
	srv := httptest.NewServer(r)
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
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// 201 {"id":1} replayed: false
	// 201 {"id":1} replayed: true
}
