package vpnwire

import (
	"bytes"
	"io"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	frames := []Frame{
		{Type: FramePacket, VPN: 0, Payload: []byte{0x45, 0, 0, 20}},
		{Type: FrameReady, VPN: 0, Payload: []byte{}},
		{Type: FrameDial, VPN: 3, Payload: []byte("abc 8080")},
		{Type: FramePacket, VPN: 1, Payload: bytes.Repeat([]byte{7}, MaxPayload)},
	}
	var buf bytes.Buffer
	for _, f := range frames {
		if err := Write(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range frames {
		got, err := Read(&buf)
		if err != nil || got.Type != want.Type || got.VPN != want.VPN || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame %d: got %c/%d/%d bytes, %v; want %c/%d/%d bytes", i, got.Type, got.VPN, len(got.Payload), err, want.Type, want.VPN, len(want.Payload))
		}
	}
	if _, err := Read(&buf); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
	if err := Write(io.Discard, Frame{Type: FramePacket, Payload: make([]byte, MaxPayload+1)}); err == nil {
		t.Error("a frame over MaxPayload was written")
	}
	// A frame cut short is an error, not a short frame.
	b := Encode(Frame{Type: FramePacket, Payload: []byte("12345")})
	if _, err := Read(bytes.NewReader(b[:len(b)-1])); err == nil || err == io.EOF {
		t.Errorf("a cut frame: %v", err)
	}
}
