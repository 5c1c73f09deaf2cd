// Package vpnwire is the protocol between the devnet and devnet-init over the devnet's unix socket, which
// carries a node's VPN traffic in user space (adapters/golem/devnet/vpnrelay.go, cmd/devnet-init).
//
// devnet-init connects and writes one header line, then speaks frames:
//
//	"vpn <token>\n"              the node's link: frames both ways
//	"tcp <token> <id> ok\n"      a TCP tunnel stream the devnet asked for (FrameDial): raw bytes both ways
//	"tcp <token> <id> err <msg>\n" its dial failed: msg says why; the connection ends
//
// A frame is a type byte, the index of the VPN in the node's list (the order of devnet-init vpn's
// arguments), a big-endian uint16 length and that many bytes.
package vpnwire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frame types.
const (
	// FramePacket carries one IP packet, as read from or written to the node's TUN device.
	FramePacket byte = 'P'
	// FrameReady (devnet-init → devnet) says every TUN device is up with its address; FrameError says why
	// not (text), and the link ends.
	FrameReady byte = 'R'
	FrameError byte = 'E'
	// FrameDial (devnet → devnet-init) asks for a TCP connection to the node's own address on the VPN and
	// the port given: payload "<stream id> <port>". devnet-init answers with a new connection ("tcp ...").
	FrameDial byte = 'D'
)

// MaxPayload bounds a frame's payload (uint16 length); the TUN devices' MTU stays below it.
const MaxPayload = 65535

// MTU of the nodes' TUN devices: what ya-runtime-vm gives the VM's VPN interface (1220 bytes would do
// for the relay's transport; the devnet has none, and Ethernet's 1500 is what a container expects).
const MTU = 1500

// Frame is one frame.
type Frame struct {
	Type    byte
	VPN     byte
	Payload []byte
}

// Write writes f to w in one Write call (so that frames written under one lock never interleave).
func Write(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxPayload {
		return fmt.Errorf("vpnwire: a frame of %d bytes (at most %d)", len(f.Payload), MaxPayload)
	}
	_, err := w.Write(Encode(f))
	return err
}

// Encode is f as Write writes it.
func Encode(f Frame) []byte {
	buf := make([]byte, 4+len(f.Payload))
	buf[0], buf[1] = f.Type, f.VPN
	binary.BigEndian.PutUint16(buf[2:4], uint16(len(f.Payload)))
	copy(buf[4:], f.Payload)
	return buf
}

// Read reads one frame from r (a buffered reader: it reads the header and the payload separately).
func Read(r io.Reader) (Frame, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: h[0], VPN: h[1], Payload: make([]byte, binary.BigEndian.Uint16(h[2:4]))}
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return Frame{}, fmt.Errorf("vpnwire: a frame cut short: %w", err)
	}
	return f, nil
}
