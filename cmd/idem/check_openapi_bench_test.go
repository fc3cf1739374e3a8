package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// generateOpenAPI returns an OpenAPI 3.1 JSON document of n paths, each
// with a GET, a POST and a PUT that take the key header by $ref, and a
// PATCH that does not; every state-changing operation has a request
// example, a $ref'd schema and a 409 answer.
func generateOpenAPI(n int) []byte {
	paths := map[string]any{}
	op := func(id string, key bool) map[string]any {
		o := map[string]any{
			"operationId": id,
			"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{
				"schema":  map[string]any{"$ref": "#/components/schemas/Thing"},
				"example": map[string]any{"name": id, "amount": 1},
			}}},
			"responses": map[string]any{
				"201": map[string]any{"description": "done", "content": map[string]any{"application/json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/Thing"}}}},
				"409": map[string]any{"description": "in flight"},
			},
		}
		if key {
			o["parameters"] = []any{map[string]any{"$ref": "#/components/parameters/Key"}}
		}
		return o
	}
	for i := range n {
		paths[fmt.Sprintf("/things%d/{id}", i)] = map[string]any{
			"parameters": []any{map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}, "example": "t1"}},
			"get":        map[string]any{"operationId": fmt.Sprintf("get%d", i), "responses": map[string]any{"200": map[string]any{"description": "ok"}}},
			"post":       op(fmt.Sprintf("create%d", i), true),
			"patch":      op(fmt.Sprintf("update%d", i), false),
			"put":        op(fmt.Sprintf("replace%d", i), true),
		}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "generated", "version": "1"},
		"paths":   paths,
		"components": map[string]any{
			"parameters": map[string]any{"Key": map[string]any{"name": "Idempotency-Key", "in": "header", "required": true, "schema": map[string]any{"type": "string"}}},
			"schemas": map[string]any{"Thing": map[string]any{"type": "object", "properties": map[string]any{
				"name": map[string]any{"type": "string"}, "amount": map[string]any{"type": "integer"}}}},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkOpenAPIInventory lists a 3000-operation document (1000
// paths, 4000 operations in all), from reading the file to the inventory:
//
//	go test -run '^$' -bench OpenAPIInventory -benchtime 5x ./cmd/idem/
func BenchmarkOpenAPIInventory(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.json")
	if err := os.WriteFile(path, generateOpenAPI(1000), 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		doc, err := loadOpenAPI(path, "Idempotency-Key")
		if err != nil || len(doc.Operations) != 3000 {
			b.Fatalf("%v, %d operations", err, len(doc.Operations))
		}
	}
}
