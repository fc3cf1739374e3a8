package main

import "github.com/idemkit/idem/examples/transfers"

func setupMetrics(cfg *transfers.Config) {}
