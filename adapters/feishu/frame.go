package feishu

import (
	"encoding/base64"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Frame is one message of the long connection: the pbbp2.Frame protobuf of the
// official SDKs (fixtures feishu/LONG_CONNECTION.md §3, oapi-sdk-go ws/pbbp2.pb.go).
// Every websocket binary message carries exactly one Frame.
//
//	message Header { required string key = 1; required string value = 2; }
//	message Frame {
//	  required uint64 SeqID = 1; required uint64 LogID = 2; required int32 service = 3;
//	  required int32 method = 4; repeated Header headers = 5;
//	  optional string payload_encoding = 6; optional string payload_type = 7;
//	  optional bytes payload = 8; optional string LogIDNew = 9;
//	}
type Frame struct {
	SeqID           uint64
	LogID           uint64
	Service         int32
	Method          int32 // FrameControl or FrameData
	Headers         []Header
	PayloadEncoding string
	PayloadType     string
	Payload         []byte // nil: field 8 is not written
	LogIDNew        string
}

// Header is one key/value header of a Frame; values are always strings.
type Header struct{ Key, Value string }

// Frame methods.
const (
	FrameControl int32 = 0 // ping / pong
	FrameData    int32 = 1 // event / card
)

// ErrBadFrame is returned by UnmarshalFrame for bytes that are not a valid Frame.
var ErrBadFrame = errors.New("feishu: malformed frame")

// Header returns the value of the first header named key, or "".
func (f *Frame) Header(key string) string {
	for _, h := range f.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// Marshal encodes f in the official Go SDK's layout: fields 1 to 4, 6, 7 and 9 are
// always written (proto2 required/optional as gogo emits them), field 8 only when
// Payload is not nil, so pings and acks match the SDK's bytes exactly.
func (f Frame) Marshal() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, f.SeqID)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, f.LogID)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(f.Service)))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(f.Method)))
	for _, h := range f.Headers {
		var hb []byte
		hb = protowire.AppendTag(hb, 1, protowire.BytesType)
		hb = protowire.AppendString(hb, h.Key)
		hb = protowire.AppendTag(hb, 2, protowire.BytesType)
		hb = protowire.AppendString(hb, h.Value)
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, hb)
	}
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendString(b, f.PayloadEncoding)
	b = protowire.AppendTag(b, 7, protowire.BytesType)
	b = protowire.AppendString(b, f.PayloadType)
	if f.Payload != nil {
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, f.Payload)
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendString(b, f.LogIDNew)
	return b
}

// UnmarshalFrame decodes a Frame, accepting any field order and skipping unknown
// fields. It returns an error wrapping ErrBadFrame for malformed input.
func UnmarshalFrame(b []byte) (Frame, error) {
	var f Frame
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && num >= 1 && num <= 4:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case 1:
				f.SeqID = v
			case 2:
				f.LogID = v
			case 3:
				f.Service = int32(v)
			case 4:
				f.Method = int32(v)
			}
		case typ == protowire.BytesType && num >= 5 && num <= 9:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case 5:
				h, err := unmarshalHeader(v)
				if err != nil {
					return Frame{}, err
				}
				f.Headers = append(f.Headers, h)
			case 6:
				f.PayloadEncoding = string(v)
			case 7:
				f.PayloadType = string(v)
			case 8:
				f.Payload = append([]byte{}, v...)
			case 9:
				f.LogIDNew = string(v)
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return f, nil
}

func unmarshalHeader(b []byte) (Header, error) {
	var h Header
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Header{}, fmt.Errorf("%w: header: %v", ErrBadFrame, protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == 1 || num == 2) {
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return Header{}, fmt.Errorf("%w: header: %v", ErrBadFrame, protowire.ParseError(n))
			}
			b = b[n:]
			if num == 1 {
				h.Key = v
			} else {
				h.Value = v
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return Header{}, fmt.Errorf("%w: header: %v", ErrBadFrame, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return h, nil
}

// pingFrame is the client's control ping: SeqID and LogID 0, the URL's service_id,
// one header type=ping and no payload (LONG_CONNECTION.md §4).
func pingFrame(service int32) Frame {
	return Frame{Service: service, Method: FrameControl, Headers: []Header{{"type", "ping"}}}
}

// ackFrame acknowledges a data frame by echoing it (same ids, service, method and
// headers plus biz_rt, the handling time in ms) with the payload replaced by
// {"code":code,"headers":null,"data":data}; data, when not nil, is the callback
// response JSON and is sent base64-encoded (LONG_CONNECTION.md §5).
func ackFrame(in Frame, code int, data []byte, bizRT int64) Frame {
	out := in
	out.Headers = append(append([]Header(nil), in.Headers...), Header{"biz_rt", fmt.Sprint(bizRT)})
	d := "null"
	if data != nil {
		d = `"` + base64.StdEncoding.EncodeToString(data) + `"`
	}
	out.Payload = fmt.Appendf(nil, `{"code":%d,"headers":null,"data":%s}`, code, d)
	return out
}
