package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pem, err := os.ReadFile(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate found", cfg.CACert)
		}
		tc.RootCAs = pool
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("TLS client certificate and key go together: set both or neither")
	}
	if cfg.Cert != "" {
		c, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s, key %s: %w", cfg.Cert, cfg.Key, err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
