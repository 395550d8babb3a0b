package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/api"
)

// guardConfig turns http.* into what api.Guard checks: the allowed hosts
// and the credentials of http.auth (hashes decoded; config validated them).
func guardConfig(h config.HTTP) (api.GuardConfig, error) {
	g := api.GuardConfig{AllowedHosts: h.AllowedHosts}
	if host, _, err := net.SplitHostPort(h.Listen); err == nil {
		g.ListenHost = host
	}
	for i, t := range h.Auth.Tokens {
		sum, err := hex.DecodeString(t.SHA256)
		if err != nil || len(sum) != 32 {
			return g, fmt.Errorf("http.auth.tokens[%d].sha256: not a SHA-256 in hex; store what esjet http-token prints", i)
		}
		c := api.TokenCredential{Name: t.Name, Role: t.Role}
		copy(c.SHA256[:], sum)
		g.Tokens = append(g.Tokens, c)
	}
	for _, c := range h.Auth.Certs {
		g.Certs = append(g.Certs, api.CertCredential{Name: c.Name, Role: c.Role})
	}
	return g, nil
}

// httpTLS is the HTTP listener's TLS (nil without http.tls): its key pair
// and, with client_ca_file, client certificates verified when given (a
// client may still use a token instead).
func httpTLS(t config.HTTPTLS) (*tls.Config, error) {
	if t.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("http.tls: load %s and %s: %w", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("http.tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("http.tls.client_ca_file: %s holds no PEM certificate", t.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return c, nil
}
