// Command devnet-init is what the devnet puts into every payload container, whatever its image: PID 1
// of the container, and the tool that joins it to its VPNs from outside the payload's own files.
//
// `devnet-init vpn SOCKET TOKEN CIDR...` joins the container to its VPNs in user space: a TUN device per
// VPN with the node's address, whose packets it relays to and from the devnet over the devnet's unix
// socket SOCKET (vpn.go). The container has no other network (network mode none). It talks netlink
// itself, so the payload's image needs no shell and no `ip`.
//
// Otherwise (any other arguments are ignored) it is PID 1: it stays alive for ever (the VM of a provider runs until the activity
// ends, and processes that an ExeScript `run` starts in the background keep running after the exec
// returns), reaps orphaned children, and exits on SIGTERM or SIGINT.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "vpn" {
		if len(os.Args) < 5 {
			fmt.Fprintln(os.Stderr, "usage: devnet-init vpn SOCKET TOKEN CIDR...")
			os.Exit(2)
		}
		if err := runVPN(os.Args[2], os.Args[3], os.Args[4:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	hold()
}

func hold() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
