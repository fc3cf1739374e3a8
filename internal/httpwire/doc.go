// Package httpwire holds the HTTP wire helpers that idem's HTTP packages
// share: the token syntax of RFC 9110 and a bounded body reader that costs a
// body its own size and no more.
package httpwire
