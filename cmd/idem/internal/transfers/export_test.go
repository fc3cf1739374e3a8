package transfers

// BearerPrincipal is bearerPrincipal, for the external tests that compute
// the keys derived from a principal's scope.
var BearerPrincipal = bearerPrincipal
