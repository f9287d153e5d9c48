package feishu

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestEncryptionVectors(t *testing.T) {
	var f struct {
		EncryptKey string `json:"encrypt_key"`
		DerivedKey string `json:"derived_aes_key_hex"`
		Vectors    []struct {
			Name, Plaintext, Encrypt string
			IV                       string `json:"iv_hex"`
		}
	}
	readJSON(t, "encryption_vectors.json", &f)
	if got := hex.EncodeToString(aesKey(f.EncryptKey)); got != f.DerivedKey {
		t.Errorf("aesKey = %s, want %s", got, f.DerivedKey)
	}
	if len(f.Vectors) != 4 {
		t.Fatalf("got %d vectors, want 4", len(f.Vectors))
	}
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			got, err := Decrypt(f.EncryptKey, v.Encrypt)
			if err != nil || string(got) != v.Plaintext {
				t.Fatalf("Decrypt = %q, %v; want %q", got, err, v.Plaintext)
			}
			iv, _ := hex.DecodeString(v.IV)
			enc, err := Encrypt(f.EncryptKey, []byte(v.Plaintext), iv)
			if err != nil || enc != v.Encrypt {
				t.Fatalf("Encrypt = %q, %v; want %q", enc, err, v.Encrypt)
			}
		})
	}
}

func TestDecryptRejects(t *testing.T) {
	key := "TESTencryptKey000000000000000001"
	good, _ := Encrypt(key, []byte(`{"a":1}`), make([]byte, 16))
	for name, in := range map[string]string{
		"not base64": "%%%",
		"too short":  "AAECAwQFBgcICQoLDA0ODw==",
		"wrong key":  good,
	} {
		k := key
		if name == "wrong key" {
			k = "another key"
		}
		if _, err := Decrypt(k, in); err == nil {
			t.Errorf("%s: Decrypt succeeded", name)
		}
	}
}

func TestSignatureVectors(t *testing.T) {
	var f struct {
		EncryptKey string `json:"encrypt_key"`
		Vectors    []struct {
			Name      string
			Timestamp string `json:"X-Lark-Request-Timestamp"`
			Nonce     string `json:"X-Lark-Request-Nonce"`
			RawBody   string `json:"raw_body"`
			Expected  string `json:"expected_X-Lark-Signature"`
			Expect    string
		}
	}
	readJSON(t, "signature_vectors.json", &f)
	if len(f.Vectors) != 3 {
		t.Fatalf("got %d vectors, want 3", len(f.Vectors))
	}
	for _, v := range f.Vectors {
		got := Signature(v.Timestamp, v.Nonce, f.EncryptKey, []byte(v.RawBody))
		if ok := equalSig(v.Expected, got); ok != (v.Expect == "valid") {
			t.Errorf("%s: valid = %v, want %s (computed %s)", v.Name, ok, v.Expect, got)
		}
	}
	var c struct {
		Token     string `json:"verification_token"`
		Timestamp string `json:"X-Lark-Request-Timestamp"`
		Nonce     string `json:"X-Lark-Request-Nonce"`
		RawBody   string `json:"raw_body"`
		Expected  string `json:"expected_X-Lark-Signature"`
	}
	readJSON(t, "card_action_legacy_signature_vector.json", &c)
	if got := LegacyCardSignature(c.Timestamp, c.Nonce, c.Token, []byte(c.RawBody)); got != c.Expected {
		t.Errorf("LegacyCardSignature = %s, want %s", got, c.Expected)
	}
}

func TestEncryptedBodyFixture(t *testing.T) {
	var body struct{ Encrypt string }
	readJSON(t, "event_v2_encrypted_body.json", &body)
	got, err := Decrypt("TESTencryptKey000000000000000001", body.Encrypt)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	readJSON(t, "event_v2_im_message_receive_group_at_bot.json", &b)
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("decrypted body differs from the at_bot fixture:\n%s\n%s", ja, jb)
	}
}

// TestDecryptBlocksPadding checks the constant-time padding check against every
// padding length and against broken paddings.
func TestDecryptBlocksPadding(t *testing.T) {
	key := "TESTencryptKey000000000000000001"
	iv := make([]byte, 16)
	for n := 0; n < 40; n++ {
		plain := bytes.Repeat([]byte{'x'}, n)
		enc, _ := Encrypt(key, plain, iv)
		got, err := Decrypt(key, enc)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("length %d: got %q, %v", n, got, err)
		}
	}
	for name, last := range map[string][]byte{
		"zero":           {0},
		"seventeen":      {17},
		"inconsistent":   {1, 2},
		"long and wrong": append([]byte{3}, bytes.Repeat([]byte{16}, 15)...),
	} {
		block := append(bytes.Repeat([]byte{'y'}, 16-len(last)), last...)
		enc := rawEncrypt(t, key, block, iv)
		if _, err := Decrypt(key, enc); err == nil {
			t.Errorf("%s padding accepted", name)
		}
	}
}

// rawEncrypt encrypts whole blocks without adding padding.
func rawEncrypt(t *testing.T, key string, blocks, iv []byte) string {
	t.Helper()
	b, err := aes.NewCipher(aesKey(key))
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), iv...), make([]byte, len(blocks))...)
	cipher.NewCBCEncrypter(b, iv).CryptBlocks(out[16:], blocks)
	return base64.StdEncoding.EncodeToString(out)
}
