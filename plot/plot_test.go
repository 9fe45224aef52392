package plot_test

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/png"
	"io"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/plot"
	"github.com/vramscope/vramscope/session"
)

func render(t *testing.T, file, format string) ([]byte, *session.Store) {
	t.Helper()
	s, _, _, err := export.Load("../testdata/h100/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := plot.Write(&buf, format, s, s.Processes()[0], plot.Options{Source: file}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), s
}

// TestPlotSVGAnnotations draws the real s001 run and reads the SVG back as
// XML: the title, the session peak at the byte count and place the
// diagnosis gives (4.21 GiB, in loss of step 1; max_memory_allocated
// printed by the run is 4518008832 B = 4.21 GiB), the warmup marker, a
// legend entry for each of the five phases and a shaded band per phase.
func TestPlotSVGAnnotations(t *testing.T) {
	out, _ := render(t, "s001.jsonl.gz", "svg")
	var texts []string
	fills := 0
	dec := xml.NewDecoder(bytes.NewReader(out))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if el.Name.Local == "text" {
				var s string
				if err := dec.DecodeElement(&s, &el); err != nil {
					t.Fatal(err)
				}
				texts = append(texts, strings.TrimSpace(s))
			}
			for _, a := range el.Attr {
				// the phase bands: translucent fills
				if a.Name.Local == "style" && strings.Contains(a.Value, "fill-opacity") {
					fills++
				}
			}
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"s001.jsonl.gz · pid 618 · NVIDIA H100 80GB HBM3 · warmup",
		"peak 4.21 GiB · loss of step 1",
		"steady from step 2",
		"zero_grad", "forward", "loss", "backward", "step",
		"allocated", "reserved", "NVML process used",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("SVG text lacks %q; it has:\n%s", want, all)
		}
	}
	// 30 phases (6 steps × 5) plus the five legend swatches.
	if fills < 35 {
		t.Errorf("%d translucent fills, want a band for each of the 30 phases and 5 legend swatches", fills)
	}
}

// TestPlotPNG decodes the PNG the OOM run gives: the default 10 × 5 inch
// picture at 96 dpi, with the peak marker's red drawn on it.
func TestPlotPNG(t *testing.T) {
	out, _ := render(t, "oom.jsonl.gz", "png")
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 960 || b.Dy() != 480 {
		t.Fatalf("PNG is %v, want 960×480", b)
	}
	if n := countRed(img); n < 20 {
		t.Fatalf("%d pixels of the peak's red, want the marker and its label", n)
	}
}

func countRed(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 0xb0 && g>>8 < 0x40 && bl>>8 < 0x40 {
				n++
			}
		}
	}
	return n
}

func TestPlotUnknownFormat(t *testing.T) {
	s := session.New()
	err := plot.Write(io.Discard, "gif", s, nil, plot.Options{})
	if err == nil || !strings.Contains(err.Error(), "svg, png or pdf") {
		t.Fatalf("err = %v, want a one-line error naming the formats", err)
	}
}

// TestPlotSVGOfHostileTextIsXML: plot -o x.svg wrote the raw C0 bytes of a
// host, argv or device name into the SVG, which XML does not allow (no
// viewer opens it), and exited 0. Every text goes through textesc now.
func TestPlotSVGOfHostileTextIsXML(t *testing.T) {
	s, _, _, err := export.Load("../testdata/recordings/hostile_text.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := plot.Write(&buf, "svg", s, s.Processes()[0], plot.Options{Source: "a\x1b]0;t\x07.jsonl"}); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
	}
	if !bytes.Contains(buf.Bytes(), []byte(`dev\x1b]0;pwned`)) {
		t.Error("the device name is not shown escaped")
	}
}
