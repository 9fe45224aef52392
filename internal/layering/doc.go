// Package layering holds no code: its test pins which package may import
// which (docs/architecture.md, "Floors").
package layering
