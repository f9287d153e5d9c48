package agents

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // registers GIF (image.Decode yields the first frame)
	"image/jpeg"
	"image/png"
	"net/http"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registers WebP with image.Decode / DecodeConfig
)

// DefaultMaxImageSide is the longest side, in pixels, of an image sent to a
// vision model (Options.MaxImageSide); 1568 px is a common vision-model limit.
const DefaultMaxImageSide = 1568

// maxImagePixels refuses images whose header declares more pixels than this
// (width × height, 50 MP) before any pixel is decoded, so a small file that
// declares huge dimensions (a decompression bomb) costs no memory.
const maxImagePixels = 50_000_000

// maxImageFileBytes bounds how much of an image file is read before fitting
// (the inbound cap files.max_file_bytes normally keeps files far smaller).
const maxImageFileBytes = 64 << 20

// jpegQualities are tried in order until the encoded image fits maxBytes;
// after the last one the image is scaled down further.
var jpegQualities = []int{85, 75, 65, 50}

// maxShrinkSteps bounds the scale-down retries of fitImage (each 3/4).
const maxShrinkSteps = 8

// errNotImage marks content that is not a PNG, JPEG, GIF or WebP image, or
// that does not decode as one (a corrupt file).
var errNotImage = errors.New("not a readable image")

// fitImage returns an image a vision model can take (DESIGN.md §4 ingest,
// vision): b unchanged, with its sniffed MIME type, when it decodes, is at
// most maxBytes and its long side at most maxSide pixels; otherwise the image
// decoded (GIF: first frame), scaled down to fit maxSide keeping its aspect
// ratio, and re-encoded as JPEG (quality 85 stepping down to 50) or as PNG when
// it has transparency, shrinking further until it is at most maxBytes.
// Dimensions are read from the header first: more than maxImagePixels is
// refused without decoding. Errors wrap errNotImage for unknown or corrupt
// content; an image that cannot be brought under maxBytes is an error too.
func fitImage(b []byte, maxBytes int64, maxSide int) ([]byte, string, error) {
	typ := http.DetectContentType(b)
	switch typ {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		return nil, "", fmt.Errorf("%w: content is %s", errNotImage, typ)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errNotImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxImagePixels {
		return nil, "", fmt.Errorf("%w: %dx%d pixels (at most %d allowed)", errNotImage, cfg.Width, cfg.Height, maxImagePixels)
	}
	// Decoded even when it fits: a corrupt image would make the model's
	// endpoint refuse the whole request.
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errNotImage, err)
	}
	if int64(len(b)) <= maxBytes && max(cfg.Width, cfg.Height) <= maxSide {
		return b, typ, nil
	}
	alpha := !opaque(img)
	side := min(max(cfg.Width, cfg.Height), maxSide)
	for step := 0; step <= maxShrinkSteps && side >= 1; step++ {
		small := scale(img, side)
		if alpha {
			var buf bytes.Buffer
			if err := png.Encode(&buf, small); err != nil {
				return nil, "", err
			}
			if int64(buf.Len()) <= maxBytes {
				return buf.Bytes(), "image/png", nil
			}
		} else {
			for _, q := range jpegQualities {
				var buf bytes.Buffer
				if err := jpeg.Encode(&buf, small, &jpeg.Options{Quality: q}); err != nil {
					return nil, "", err
				}
				if int64(buf.Len()) <= maxBytes {
					return buf.Bytes(), "image/jpeg", nil
				}
			}
		}
		side = side * 3 / 4
	}
	return nil, "", fmt.Errorf("image does not fit in %d bytes even scaled down", maxBytes)
}

// scale returns img resized so that its long side is side pixels (aspect
// ratio kept, each side at least 1 px), or img itself when it already fits.
func scale(img image.Image, side int) image.Image {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	if max(w, h) <= side {
		return img
	}
	nw, nh := side, max(1, h*side/w)
	if h > w {
		nw, nh = max(1, w*side/h), side
	}
	dst := image.NewRGBA(image.Rect(0, 0, nw, nh))
	draw.CatmullRom.Scale(dst, dst.Bounds(), img, r, draw.Src, nil)
	return dst
}

// opaque reports whether img has no transparent pixel: the image's own
// Opaque method when it has one (every standard image type does), else true.
func opaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return true
}
