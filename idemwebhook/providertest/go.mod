module github.com/idemkit/idem/idemwebhook/providertest

go 1.26.0

require (
	github.com/google/go-github/v74 v74.0.0
	github.com/idemkit/idem v0.0.0
	github.com/stripe/stripe-go/v82 v82.5.1
	github.com/svix/svix-webhooks v1.44.0
)

require (
	github.com/google/go-querystring v1.1.0 // indirect
	gopkg.in/validator.v2 v2.0.1 // indirect
)

replace github.com/idemkit/idem => ../..
