package main

// The wire protocol, the same as the Rust server's (PROTOCOL.md): a request is
// [body length: u32 LE][op: u8][fields, LE]; every request gets one 17-byte response,
// [13: u32 LE][status: u8][last read: u64 LE][mentions: u32 LE]. A request whose op byte has
// opTraced set carries its trace context (trace id 16 bytes, span id 8) before its fields;
// this server reads past it.

import (
	"encoding/binary"
)

const (
	opAck     = 1 // user u64, channel u64, message id u64
	opMention = 2 // user u64, channel u64
	opGet     = 3 // user u64, channel u64

	// opTraced in the op byte: the trace id and the sending span's id (traceContext bytes)
	// come before the op's fields.
	opTraced     = 0x80
	traceContext = 24

	statusOK         = 0
	statusUnknownOp  = 1 // the connection stays open
	statusBadLength  = 2 // the body length does not fit the op, is 0, or is above maxBody
	statusStoreError = 3 // the store could not be read or written; the cache is unchanged

	// Bodies longer than this are refused with statusBadLength and the connection is
	// closed without reading them.
	maxBody      = 1024
	ackBody      = 25
	keyBody      = 17
	responseBody = 1 + 8 + 4
	responseLen  = 4 + responseBody
)

// Key is one read state's identity.
type Key struct {
	User    uint64
	Channel uint64
}

// ReadState is the counters of one (user, channel).
type ReadState struct {
	LastRead uint64
	Mentions uint32
}

// Request is a decoded request.
type Request struct {
	Op        byte
	Key       Key
	MessageID uint64 // acks only
}

// decodeRequest reads a body (what follows the length prefix), or returns the error status
// to answer with.
func decodeRequest(body []byte) (Request, byte) {
	if len(body) == 0 {
		return Request{}, statusBadLength
	}
	op := body[0] &^ opTraced
	var expected int
	switch op {
	case opAck:
		expected = ackBody
	case opMention, opGet:
		expected = keyBody
	default:
		return Request{}, statusUnknownOp
	}
	if body[0]&opTraced != 0 {
		expected += traceContext
	}
	if len(body) != expected {
		return Request{}, statusBadLength
	}
	fields := body[1:]
	if body[0]&opTraced != 0 {
		fields = fields[traceContext:]
	}
	req := Request{
		Op: op,
		Key: Key{
			User:    binary.LittleEndian.Uint64(fields[0:8]),
			Channel: binary.LittleEndian.Uint64(fields[8:16]),
		},
	}
	if req.Op == opAck {
		req.MessageID = binary.LittleEndian.Uint64(fields[16:24])
	}
	return req, statusOK
}

// encodeResponse writes a response into out.
func encodeResponse(out *[responseLen]byte, status byte, state ReadState) {
	binary.LittleEndian.PutUint32(out[0:4], responseBody)
	out[4] = status
	binary.LittleEndian.PutUint64(out[5:13], state.LastRead)
	binary.LittleEndian.PutUint32(out[13:17], state.Mentions)
}
