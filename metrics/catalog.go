package metrics

// Family is one metric the exporter may serve: its name, help and label
// names, as its descriptor has them.
type Family struct {
	Name   string
	Help   string
	Labels []string
}

// catalog lists every descriptor desc made, in the order they are declared.
var catalog []Family

// Catalog returns every metric family of vramscope's own that a scrape may
// carry (a family appears once it has a value), with its label names;
// tests of the shipped dashboard and rules check their queries against it.
// Prometheus adds its target labels (job, instance) at scrape time.
func Catalog() []Family {
	out := make([]Family, len(catalog))
	for i, f := range catalog {
		out[i] = Family{Name: f.Name, Help: f.Help, Labels: append([]string(nil), f.Labels...)}
	}
	return out
}
