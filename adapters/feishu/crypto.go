package feishu

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
)

// ErrDecrypt is returned by Decrypt for a payload that is not valid base64, is not a
// whole number of AES blocks after its IV, or does not end in valid PKCS#7 padding.
var ErrDecrypt = errors.New("feishu: cannot decrypt payload")

// aesKey derives the AES-256 key from an app's Encrypt Key: SHA-256 of its bytes.
// https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-configure-/encrypt-key-encryption-configuration-case
func aesKey(encryptKey string) []byte {
	sum := sha256.Sum256([]byte(encryptKey))
	return sum[:]
}

// Decrypt decodes the "encrypt" field of an encrypted event or callback body: base64
// of IV (16 bytes) || AES-256-CBC ciphertext under SHA-256(encryptKey), PKCS#7 padded
// (fixtures feishu/API_NOTES.md "Encryption"). It returns ErrDecrypt on any failure.
// The padding is checked in constant time (decryptBlocks).
func Decrypt(encryptKey, encrypted string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil || !wholeBlocks(raw) {
		return nil, ErrDecrypt
	}
	plain, ok := decryptBlocks(encryptKey, raw)
	if ok != 1 {
		return nil, ErrDecrypt
	}
	return plain, nil
}

// wholeBlocks reports whether raw is an IV and at least one whole AES block.
func wholeBlocks(raw []byte) bool {
	return len(raw) >= 2*aes.BlockSize && len(raw)%aes.BlockSize == 0
}

// decryptBlocks decrypts raw (IV || ciphertext, whole blocks) and strips the PKCS#7
// padding, doing the same work whether the padding is valid or not: ok is 1 for
// valid padding, else 0 and plain is the unstripped plaintext. A raw of the wrong
// length is replaced by two zero blocks and gives ok 0, so even that costs the
// same. This is what keeps the unsigned challenge path from being a padding oracle
// (DESIGN.md §9).
func decryptBlocks(encryptKey string, raw []byte) (plain []byte, ok int) {
	ok = 1
	if !wholeBlocks(raw) {
		raw, ok = make([]byte, 2*aes.BlockSize), 0
	}
	block, err := aes.NewCipher(aesKey(encryptKey))
	if err != nil {
		return nil, 0
	}
	iv, ct := raw[:aes.BlockSize], raw[aes.BlockSize:]
	out := make([]byte, len(ct))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, ct)
	n := int(out[len(out)-1])
	pad := subtle.ConstantTimeLessOrEq(1, n) & subtle.ConstantTimeLessOrEq(n, aes.BlockSize)
	for i := 0; i < aes.BlockSize; i++ {
		inPad := subtle.ConstantTimeLessOrEq(i+1, n)
		same := subtle.ConstantTimeByteEq(out[len(out)-1-i], byte(n))
		pad &= same | (inPad ^ 1)
	}
	cut := subtle.ConstantTimeSelect(pad, n, 0)
	return out[:len(out)-cut], ok & pad
}

// Encrypt is the inverse of Decrypt with the given 16-byte IV (Feishu uses a random
// one per message). It is what the platform does; tests and fakes use it to build
// encrypted requests.
func Encrypt(encryptKey string, plaintext, iv []byte) (string, error) {
	if len(iv) != aes.BlockSize {
		return "", errors.New("feishu: IV must be 16 bytes")
	}
	block, err := aes.NewCipher(aesKey(encryptKey))
	if err != nil {
		return "", err
	}
	n := aes.BlockSize - len(plaintext)%aes.BlockSize
	padded := append(append([]byte(nil), plaintext...), bytes.Repeat([]byte{byte(n)}, n)...)
	out := make([]byte, aes.BlockSize+len(padded))
	copy(out, iv)
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out[aes.BlockSize:], padded)
	return base64.StdEncoding.EncodeToString(out), nil
}

// Signature returns the X-Lark-Signature of an event or card.action.trigger request:
// lowercase hex of SHA-256(timestamp + nonce + encryptKey + body) over the exact raw
// body (https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-configure-/request-url-configuration-case).
func Signature(timestamp, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp + nonce + encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// LegacyCardSignature returns the signature of a legacy card request-URL callback:
// lowercase hex of SHA-1(timestamp + nonce + verificationToken + body) (fixtures
// feishu/API_NOTES.md "Card callbacks", oapi-sdk-go card/card.go).
func LegacyCardSignature(timestamp, nonce, verificationToken string, body []byte) string {
	h := sha1.New()
	h.Write([]byte(timestamp + nonce + verificationToken))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// equalSig compares two hex signatures in constant time, ignoring case.
func equalSig(got, want string) bool {
	return subtle.ConstantTimeCompare(bytes.ToLower([]byte(got)), []byte(want)) == 1
}
