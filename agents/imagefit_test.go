package agents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand"
	"testing"
)

// noisy returns a w×h image of random pixels (hard to compress), with
// transparency when alpha is set.
func noisy(w, h int, alpha bool) *image.NRGBA {
	rng := rand.New(rand.NewSource(1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			a := uint8(255)
			if alpha && x < w/2 {
				a = 128
			}
			img.Set(x, y, color.NRGBA{uint8(rng.Intn(256)), uint8(x), uint8(y), a})
		}
	}
	return img
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkFits decodes out and checks its type, bounds and aspect ratio.
func checkFits(t *testing.T, out []byte, typ, wantTyp string, maxBytes int64, maxSide, srcW, srcH int) {
	t.Helper()
	if typ != wantTyp {
		t.Errorf("type = %s, want %s", typ, wantTyp)
	}
	if int64(len(out)) > maxBytes {
		t.Errorf("size = %d, want <= %d", len(out), maxBytes)
	}
	img, _, err := image.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("result does not decode: %v", err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if max(w, h) > maxSide {
		t.Errorf("result %dx%d, long side over %d", w, h, maxSide)
	}
	if got, want := float64(w)/float64(h), float64(srcW)/float64(srcH); got < want*0.95 || got > want*1.05 {
		t.Errorf("aspect %dx%d = %.3f, want about %.3f", w, h, got, want)
	}
}

func TestFitImageResizesLargePNGWithAlphaAsPNG(t *testing.T) {
	src := encodePNG(t, noisy(800, 400, true))
	const maxBytes = 100 << 10
	out, typ, err := fitImage(src, maxBytes, 300)
	if err != nil {
		t.Fatal(err)
	}
	checkFits(t, out, typ, "image/png", maxBytes, 300, 800, 400)
}

func TestFitImageResizesLargeOpaquePNGAsJPEG(t *testing.T) {
	src := encodePNG(t, noisy(300, 600, false))
	out, typ, err := fitImage(src, 4<<20, 200)
	if err != nil {
		t.Fatal(err)
	}
	checkFits(t, out, typ, "image/jpeg", 4<<20, 200, 300, 600)
}

func TestFitImageShrinksLargeJPEGUnderByteCap(t *testing.T) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, noisy(600, 400, false), &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	const maxBytes = 20 << 10 // the source is far larger: quality and size must step down
	if buf.Len() <= maxBytes {
		t.Fatalf("source only %d bytes", buf.Len())
	}
	out, typ, err := fitImage(buf.Bytes(), maxBytes, 1568)
	if err != nil {
		t.Fatal(err)
	}
	checkFits(t, out, typ, "image/jpeg", maxBytes, 1568, 600, 400)
}

func TestFitImagePassesSmallImageUnchanged(t *testing.T) {
	src := encodePNG(t, noisy(64, 32, true))
	out, typ, err := fitImage(src, 4<<20, 1568)
	if err != nil {
		t.Fatal(err)
	}
	if typ != "image/png" || !bytes.Equal(out, src) {
		t.Errorf("small image changed: type %s, %d bytes (was %d)", typ, len(out), len(src))
	}
}

// bombPNG is a tiny PNG whose header declares width×height pixels; its pixel
// data is absent, so only a decoder that trusts the header would allocate.
func bombPNG(width, height uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], width)
	binary.BigEndian.PutUint32(ihdr[4:], height)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	chunk("IHDR", ihdr)
	chunk("IEND", nil)
	return b.Bytes()
}

func TestFitImageRefusesDecompressionBomb(t *testing.T) {
	src := bombPNG(100_000, 100_000) // 10 GP declared, ~60 bytes of file
	_, _, err := fitImage(src, 4<<20, 1568)
	if !errors.Is(err, errNotImage) {
		t.Fatalf("err = %v, want errNotImage", err)
	}
}

func TestFitImageNotesCorruptFile(t *testing.T) {
	src := encodePNG(t, noisy(300, 300, false))
	corrupt := append([]byte(nil), src[:len(src)/3]...) // header intact, data cut
	for name, b := range map[string][]byte{"truncated": corrupt, "text": []byte("not an image at all")} {
		if _, _, err := fitImage(b, 4<<20, 1568); !errors.Is(err, errNotImage) {
			t.Errorf("%s: err = %v, want errNotImage", name, err)
		}
		if got := imageNote(errNotImage); got == "" {
			t.Error("empty note")
		}
	}
}

func TestFitImageResizesGIFFirstFrame(t *testing.T) {
	frame := image.NewPaletted(image.Rect(0, 0, 300, 150), palette.Plan9)
	for x := 0; x < 300; x++ {
		frame.SetColorIndex(x, x%150, uint8(x))
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, &gif.GIF{Image: []*image.Paletted{frame, frame}, Delay: []int{10, 10}}); err != nil {
		t.Fatal(err)
	}
	out, typ, err := fitImage(buf.Bytes(), 4<<20, 120)
	if err != nil {
		t.Fatal(err)
	}
	checkFits(t, out, typ, "image/jpeg", 4<<20, 120, 300, 150)
}
