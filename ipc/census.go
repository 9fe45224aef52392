package ipc

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Bounds of a census (docs/protocol.md, "census"): the hook names at most 12
// holders; a monitor accepts up to maxCensusHolders so that a later hook
// may name a few more.
const (
	maxCensusHolders = 32
	maxHolderName    = 256
	maxHolderFile    = 1024
)

// Census reasons: why the hook took it.
const (
	CensusRequest  = "request"  // the monitor asked (a key, the command line)
	CensusSuspect  = "suspect"  // the monitor asked on suspicion of a leak
	CensusFollowup = "followup" // the hook's second census, some steps after a suspect one
	CensusUser     = "user"     // the training script called vramscope.census()
	CensusOOM      = "oom"      // at an out-of-memory error, before the process may die
)

// Holder kinds: what names the root that keeps tensors alive.
const (
	HolderLocal  = "local"  // a local variable of a running function
	HolderGlobal = "global" // a module's global
	HolderAttr   = "attr"   // an attribute of an object (Encoder.cache)
)

// Census is the hook's census of the live tensors on its device: the
// storages of parameters, gradients, optimizer state and the rest, and the
// holders of the rest with the autograd graphs they keep alive.
type Census struct {
	// Reason is one of the Census* reasons; Request the id of the monitor's
	// request it answers (nil: none).
	Reason  string `json:"reason"`
	Request *int64 `json:"request"`
	// Device is the device type whose tensors were counted ("cuda", "cpu").
	Device string `json:"device"`
	// Tensors is how many tensor objects on the device were seen.
	Tensors int64 `json:"tensors"`
	// Groups splits their storages, each counted once.
	Groups CensusGroups `json:"groups"`
	// Holders are the named roots of the "other" tensors, largest first;
	// Rest sums those left out.
	Holders []CensusHolder `json:"holders"`
	Rest    CensusRest     `json:"rest"`
	// Unattributed sums the groups of other tensors whose root the search
	// did not reach (held by a C extension, a closure, a class attribute).
	Unattributed CensusUnattributed `json:"unattributed"`
	// Complete is false when the census stopped at its time budget (or
	// left some tensors without a root): its figures are lower bounds.
	Complete bool `json:"complete"`
	// CostMS is what it cost the training thread, in milliseconds.
	CostMS CensusCost `json:"cost_ms"`
	// Allocator is the CUDA caching allocator at an out-of-memory error
	// (reason CensusOOM on a CUDA device; nil otherwise).
	Allocator *CensusAllocator `json:"allocator,omitempty"`
	// SavedByModule splits the saved tensors still in the graphs the census
	// walked, each storage once, by module (nil from hooks that send none).
	SavedByModule *CensusSavedByModule `json:"saved_by_module,omitempty"`
	// Capture is the allocator history window that ended at this census
	// (a follow-up on CUDA asked with a capture directory; nil otherwise).
	Capture *CensusCapture `json:"capture,omitempty"`
}

// CensusSavedByModule is the saved tensors of the walked graphs by module:
// the module with weights that takes the saving node's output (its own
// operation where the node reads the module's weights), else the nearest
// module with weights below it; Module nil where neither exists. The
// largest Modules, and the Rest summed.
type CensusSavedByModule struct {
	Modules []CensusModuleBytes `json:"modules"`
	Rest    struct {
		Modules int64 `json:"modules"`
		Bytes   int64 `json:"bytes"`
	} `json:"rest"`
	// AlsoOther is the bytes of these storages that the census's "other"
	// group counts too: saved tensors the collector lists (a layer's
	// output the next layer saved). Nil from hooks that do not say.
	AlsoOther *int64 `json:"also_other,omitempty"`
}

// CensusModuleBytes is one module's saved bytes.
type CensusModuleBytes struct {
	Module *string `json:"module"`
	Bytes  int64   `json:"bytes"`
}

// Total is every module's bytes and the rest's.
func (s *CensusSavedByModule) Total() int64 {
	t := s.Rest.Bytes
	for _, m := range s.Modules {
		t += m.Bytes
	}
	return t
}

func (s *CensusSavedByModule) validate() error {
	if len(s.Modules) > maxCensusHolders {
		return fmt.Errorf("field census.saved_by_module.modules: more than %d entries", maxCensusHolders)
	}
	for i := range s.Modules {
		m := &s.Modules[i]
		if m.Module != nil && (*m.Module == "" || len(*m.Module) > maxHolderName || !utf8.ValidString(*m.Module)) {
			return fmt.Errorf("field census.saved_by_module.modules.module: empty, longer than %d bytes or not UTF-8", maxHolderName)
		}
		if err := sizes(opt{"census.saved_by_module.modules.bytes", &m.Bytes}); err != nil {
			return err
		}
	}
	if err := sizes(opt{"census.saved_by_module.rest.modules", &s.Rest.Modules},
		opt{"census.saved_by_module.rest.bytes", &s.Rest.Bytes},
		opt{"census.saved_by_module.also_other", s.AlsoOther}); err != nil {
		return err
	}
	if s.AlsoOther != nil && *s.AlsoOther > s.Total() {
		return fmt.Errorf("field census.saved_by_module.also_other: more than the saved bytes")
	}
	return nil
}

// CensusCapture is one window of the allocator's history: the snapshot
// file the hook wrote (empty when it could not write one), the steps it
// covers, its trace entries against the cap, the sites whose allocations
// made in it are still live, and what it cost.
type CensusCapture struct {
	File       string        `json:"file"`
	FromStep   int           `json:"from_step"`
	ToStep     int           `json:"to_step"`
	Entries    int64         `json:"entries"`
	MaxEntries int64         `json:"max_entries"`
	Sites      []CaptureSite `json:"sites"`
	CostMS     float64       `json:"cost_ms"`
}

// CaptureSite is an allocation site (the innermost frame in the user's
// code) and the bytes and allocations made there that are still live.
type CaptureSite struct {
	File     string `json:"file"`
	Line     *int   `json:"line"`
	Function string `json:"function"`
	Bytes    int64  `json:"bytes"`
	Count    int64  `json:"count"`
}

// CensusAllocator is the caching allocator at an out-of-memory error. Every
// figure is nil where its source was missing.
type CensusAllocator struct {
	// Allocated and Reserved are the allocator's counters; Cache is
	// Reserved - Allocated.
	Allocated *int64 `json:"allocated"`
	Reserved  *int64 `json:"reserved"`
	Cache     *int64 `json:"cache"`
	// Requested is what the failed allocation asked for; DeviceFree the
	// device's free memory then; NonPyTorch the device's used memory
	// beyond Reserved (the CUDA context, other allocators).
	Requested  *int64 `json:"requested"`
	DeviceFree *int64 `json:"device_free"`
	NonPyTorch *int64 `json:"non_pytorch"`
	// Segments, FreeInCache and LargestFree come from the allocator's
	// snapshot: its segments, their free blocks' total and the largest.
	Segments    *int64 `json:"segments"`
	FreeInCache *int64 `json:"free_in_cache"`
	LargestFree *int64 `json:"largest_free"`
	// Expandable says whether the segments are expandable (nil: torch does
	// not say); Fragmented whether the cache had room for the request in
	// no single block (nil: unknown).
	Expandable *bool `json:"expandable"`
	Fragmented *bool `json:"fragmented"`
}

// CensusGroups are the census's groups of storages.
type CensusGroups struct {
	Parameters CensusGroup `json:"parameters"`
	Gradients  CensusGroup `json:"gradients"`
	Optimizer  CensusGroup `json:"optimizer"`
	Other      CensusGroup `json:"other"`
}

// CensusGroup is one group: its distinct storages' bytes and its tensors.
type CensusGroup struct {
	Bytes   int64 `json:"bytes"`
	Tensors int64 `json:"tensors"`
}

// CensusHolder is one root that keeps tensors alive and what is under it.
type CensusHolder struct {
	// Kind is one of the Holder* kinds; Name the root with the path to the
	// tensors ("losses[...]", "Encoder.cache[...]", `history["x"][...]`);
	// Container the type of what holds the tensors themselves ("list",
	// "Tensor" for a name bound to a tensor).
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Container string `json:"container"`
	// Function is the running function of a local (the module of a
	// global); File and Line where the source adds to the root (else the
	// line the function is at); empty and nil when unknown.
	Function string `json:"function"`
	File     string `json:"file"`
	Line     *int   `json:"line"`
	// Tensors and Bytes are the tensors under the root on the device and
	// their distinct storages (parameters and the like not counted again);
	// Dtype the commonest dtype among them.
	Tensors int64  `json:"tensors"`
	Bytes   int64  `json:"bytes"`
	Dtype   string `json:"dtype"`
	// Graphs is how many autograd graphs those tensors keep alive,
	// GraphNodes their nodes, GraphSaved the saved tensors still in them
	// (bytes), GraphFreed how many of the graphs backward has run through
	// (their saved tensors are freed: not counted).
	Graphs     int64 `json:"graphs"`
	GraphNodes int64 `json:"graph_nodes"`
	GraphSaved int64 `json:"graph_saved"`
	GraphFreed int64 `json:"graph_freed"`
	// FirstStep and LastStep are the steps at which the hook first saw the
	// oldest and the newest of those graphs (nil: no graph).
	FirstStep *int `json:"first_step"`
	LastStep  *int `json:"last_step"`
}

// CensusRest sums the holders left out of Census.Holders.
type CensusRest struct {
	Holders int64 `json:"holders"`
	Bytes   int64 `json:"bytes"`
}

// CensusUnattributed sums the other tensors left without a holder.
type CensusUnattributed struct {
	Groups  int64 `json:"groups"`
	Tensors int64 `json:"tensors"`
	Bytes   int64 `json:"bytes"`
}

// CensusCost is a census's cost on the training thread, in milliseconds:
// listing the tensors, finding holders, walking graphs, and in all.
type CensusCost struct {
	List    float64 `json:"list"`
	Holders float64 `json:"holders"`
	Graphs  float64 `json:"graphs"`
	Total   float64 `json:"total"`
}

func (m *Message) validateCensus() error {
	if m.Step < 0 {
		return errors.New("field step: negative")
	}
	c := m.Census
	if c == nil {
		return errors.New("field census: missing")
	}
	switch c.Reason {
	case CensusRequest, CensusSuspect, CensusFollowup, CensusUser, CensusOOM:
	default:
		return fmt.Errorf("field census.reason: %q is not a census reason", clip(c.Reason))
	}
	if err := sizes(opt{"census.request", c.Request}, opt{"census.tensors", &c.Tensors},
		opt{"census.rest.holders", &c.Rest.Holders}, opt{"census.rest.bytes", &c.Rest.Bytes},
		opt{"census.unattributed.groups", &c.Unattributed.Groups}, opt{"census.unattributed.tensors", &c.Unattributed.Tensors},
		opt{"census.unattributed.bytes", &c.Unattributed.Bytes}); err != nil {
		return err
	}
	if c.Device == "" {
		return errors.New("field census.device: missing")
	}
	if err := token("census.device", c.Device); err != nil {
		return err
	}
	g := &c.Groups
	for _, f := range []struct {
		name string
		g    *CensusGroup
	}{{"parameters", &g.Parameters}, {"gradients", &g.Gradients}, {"optimizer", &g.Optimizer}, {"other", &g.Other}} {
		if err := sizes(opt{"census.groups." + f.name + ".bytes", &f.g.Bytes},
			opt{"census.groups." + f.name + ".tensors", &f.g.Tensors}); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"list", c.CostMS.List}, {"holders", c.CostMS.Holders}, {"graphs", c.CostMS.Graphs}, {"total", c.CostMS.Total}} {
		if err := finite("census.cost_ms."+f.name, f.v); err != nil {
			return err
		}
	}
	if a := c.Allocator; a != nil {
		if err := sizes(opt{"census.allocator.allocated", a.Allocated}, opt{"census.allocator.reserved", a.Reserved},
			opt{"census.allocator.cache", a.Cache}, opt{"census.allocator.requested", a.Requested},
			opt{"census.allocator.device_free", a.DeviceFree}, opt{"census.allocator.non_pytorch", a.NonPyTorch},
			opt{"census.allocator.segments", a.Segments}, opt{"census.allocator.free_in_cache", a.FreeInCache},
			opt{"census.allocator.largest_free", a.LargestFree}); err != nil {
			return err
		}
		if a.LargestFree != nil && a.FreeInCache != nil && *a.LargestFree > *a.FreeInCache {
			return errors.New("field census.allocator.largest_free: above free_in_cache")
		}
	}
	if k := c.Capture; k != nil {
		if err := k.validate(); err != nil {
			return err
		}
	}
	if sm := c.SavedByModule; sm != nil {
		if err := sm.validate(); err != nil {
			return err
		}
	}
	if len(c.Holders) > maxCensusHolders {
		return fmt.Errorf("field census.holders: more than %d entries", maxCensusHolders)
	}
	for i := range c.Holders {
		if err := c.Holders[i].validate(); err != nil {
			return err
		}
	}
	return nil
}

func (h *CensusHolder) validate() error {
	switch h.Kind {
	case HolderLocal, HolderGlobal, HolderAttr:
	default:
		return fmt.Errorf("field census.holders.kind: %q is not a holder kind", clip(h.Kind))
	}
	if h.Name == "" {
		return errors.New("field census.holders.name: missing")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"name", h.Name, maxHolderName}, {"container", h.Container, maxName}, {"function", h.Function, maxHolderName},
		{"file", h.File, maxHolderFile}, {"dtype", h.Dtype, maxName}} {
		if len(f.v) > f.max || !utf8.ValidString(f.v) {
			return fmt.Errorf("field census.holders.%s: longer than %d bytes or not UTF-8", f.name, f.max)
		}
	}
	if h.Line != nil && *h.Line <= 0 {
		return errors.New("field census.holders.line: not positive")
	}
	if err := sizes(opt{"census.holders.tensors", &h.Tensors}, opt{"census.holders.bytes", &h.Bytes},
		opt{"census.holders.graphs", &h.Graphs}, opt{"census.holders.graph_nodes", &h.GraphNodes},
		opt{"census.holders.graph_saved", &h.GraphSaved}, opt{"census.holders.graph_freed", &h.GraphFreed}); err != nil {
		return err
	}
	if h.GraphFreed > h.Graphs {
		return fmt.Errorf("field census.holders.graph_freed: %d above graphs %d", h.GraphFreed, h.Graphs)
	}
	for _, s := range []*int{h.FirstStep, h.LastStep} {
		if s != nil && (*s < 0 || *s >= maxInteger) {
			return errors.New("field census.holders.first_step/last_step: not a step")
		}
	}
	if h.FirstStep != nil && h.LastStep != nil && *h.FirstStep > *h.LastStep {
		return errors.New("field census.holders.first_step: after last_step")
	}
	return nil
}

func (k *CensusCapture) validate() error {
	if len(k.File) > maxHolderFile || !utf8.ValidString(k.File) {
		return errors.New("field census.capture.file: longer than 1024 bytes or not UTF-8")
	}
	if k.FromStep < 0 || k.ToStep < k.FromStep {
		return errors.New("field census.capture.from_step/to_step: not a window of steps")
	}
	if err := sizes(opt{"census.capture.entries", &k.Entries}, opt{"census.capture.max_entries", &k.MaxEntries}); err != nil {
		return err
	}
	if err := finite("census.capture.cost_ms", k.CostMS); err != nil {
		return err
	}
	if len(k.Sites) > maxCensusHolders {
		return fmt.Errorf("field census.capture.sites: more than %d entries", maxCensusHolders)
	}
	for _, s := range k.Sites {
		if len(s.File) > maxHolderFile || len(s.Function) > maxHolderName || !utf8.ValidString(s.File) || !utf8.ValidString(s.Function) {
			return errors.New("field census.capture.sites: file or function too long or not UTF-8")
		}
		if s.Line != nil && *s.Line <= 0 {
			return errors.New("field census.capture.sites.line: not positive")
		}
		if err := sizes(opt{"census.capture.sites.bytes", &s.Bytes}, opt{"census.capture.sites.count", &s.Count}); err != nil {
			return err
		}
	}
	return nil
}
