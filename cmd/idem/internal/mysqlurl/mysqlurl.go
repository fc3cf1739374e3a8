// Package mysqlurl reads the mysql:// URLs of idem's commands.
package mysqlurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// IsURL reports whether db is a mysql:// URL.
func IsURL(db string) bool { return strings.HasPrefix(db, "mysql://") }

// DSN turns a mysql://user:password@host:port/database?param=value URL
// into go-sql-driver/mysql's DSN. The parameters are the driver's (see
// mysql.ParseDSN; any other is a system variable the driver sets on each
// connection). Unless the URL says otherwise, the connections count
// matched rows (clientFoundRows=true, which the ledger needs), send their
// parameters within the statement (interpolateParams=true: one round trip
// a statement) and give up connecting after 10 seconds.
func DSN(db string) (string, error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", errors.New("not a mysql://user:password@host:port/database URL")
	}
	host := u.Host
	if host == "" {
		return "", errors.New("the URL names no host: mysql://user:password@host:port/database")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return "", errors.New("the URL names no database: mysql://user:password@host:port/database")
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", host, name
	q := u.Query()
	// The driver parses the parameters itself: hand it the query, then
	// put the credentials and the address from the URL back.
	parsed, err := mysql.ParseDSN("tcp(" + host + ")/" + url.PathEscape(name) + "?" + q.Encode())
	if err != nil {
		return "", fmt.Errorf("the URL's parameters: %w", err)
	}
	parsed.User, parsed.Passwd = cfg.User, cfg.Passwd
	if !q.Has("clientFoundRows") {
		parsed.ClientFoundRows = true
	}
	if !q.Has("interpolateParams") {
		parsed.InterpolateParams = true
	}
	if !q.Has("timeout") {
		parsed.Timeout = 10 * time.Second
	}
	return parsed.FormatDSN(), nil
}
