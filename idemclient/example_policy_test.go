package idemclient_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemkit/idem/idemclient"
)

// Policy.Delay is a pure function, so a backoff schedule can be inspected
// (and tested) without sleeping.
func ExamplePolicy_Delay() {
	p := idemclient.Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 6; n++ {
		d := p.Delay(n, r, idemclient.NoRetryAfter)
		ceiling := min(100*time.Millisecond<<(n-1), time.Second)
		fmt.Printf("after attempt %d: %v, drawn from [0, %v]\n", n, d.Round(time.Millisecond), ceiling)
	}
	// A Retry-After hint is a floor, capped by MaxDelay.
	fmt.Println(p.Delay(1, r, 700*time.Millisecond) >= 700*time.Millisecond)
	fmt.Println(p.Delay(1, r, time.Hour))
	// Output:
	// after attempt 1: 77ms, drawn from [0, 100ms]
	// after attempt 2: 123ms, drawn from [0, 200ms]
	// after attempt 3: 314ms, drawn from [0, 400ms]
	// after attempt 4: 637ms, drawn from [0, 800ms]
	// after attempt 5: 234ms, drawn from [0, 1s]
	// after attempt 6: 41ms, drawn from [0, 1s]
	// true
	// 1s
}
