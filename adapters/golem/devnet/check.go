package devnet

// Check reports what New would refuse in a configuration (names, prices, labels), without starting
// anything: `devnet -check-config` and `make devnet` name a bad user file before a running devnet is
// replaced by one that cannot start.
func (c Config) Check() error {
	_, err := c.withDefaults()
	return err
}
