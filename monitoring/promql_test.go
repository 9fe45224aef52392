package monitoring

import (
	"strings"
	"unicode"
)

// queryNames are the metric and label names a PromQL query (or a Grafana
// label_values() variable query) refers to.
type queryNames struct {
	metrics []string
	labels  []string
}

// promqlKeywords are the words of PromQL that are neither metrics nor
// labels.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
}

// labelLists are the words followed by a parenthesized list of labels.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

type token struct {
	text string
	kind byte // 'i' identifier, 's' string, 'n' number, 'p' punctuation
}

// lex splits a query into tokens; range selectors ([5m]) and Grafana's
// $variables are dropped.
func lex(q string) []token {
	var out []token
	r := []rune(q)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(r) && r[j] != c {
				if r[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, token{string(r[i+1 : min(j, len(r))]), 's'})
			i = j + 1
		case c == '[':
			for i < len(r) && r[i] != ']' {
				i++
			}
			i++
		case c == '$':
			i++
			for i < len(r) && (r[i] == '_' || unicode.IsLetter(r[i]) || unicode.IsDigit(r[i])) {
				i++
			}
		case c == '_' || unicode.IsLetter(c):
			j := i
			for j < len(r) && (r[j] == '_' || r[j] == ':' || unicode.IsLetter(r[j]) || unicode.IsDigit(r[j])) {
				j++
			}
			out = append(out, token{string(r[i:j]), 'i'})
			i = j
		case unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(r) && (unicode.IsDigit(r[j]) || r[j] == '.' || r[j] == 'e') {
				j++
			}
			out = append(out, token{string(r[i:j]), 'n'})
			i = j
		default:
			j := i + 1
			if j < len(r) && strings.ContainsRune("=~", r[j]) && strings.ContainsRune("=!<>", c) {
				j++
			}
			out = append(out, token{string(r[i:j]), 'p'})
			i = j
		}
	}
	return out
}

// namesOf finds the metrics and labels a query names: an identifier inside
// braces is a label, as is one in a by/on/group_left/... list or the
// second argument of label_values(); an identifier followed by "(" is a
// function or an aggregation; any other is a metric.
func namesOf(q string) queryNames {
	var n queryNames
	toks := lex(q)
	braces := 0
	inList := false
	labelValues := -1 // paren depth of an open label_values( call
	depth := 0
	for i, t := range toks {
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1].text
		}
		switch t.text {
		case "{":
			braces++
			continue
		case "}":
			braces--
			continue
		case "(":
			depth++
			continue
		case ")":
			if inList {
				inList = false
			}
			if depth == labelValues {
				labelValues = -1
			}
			depth--
			continue
		}
		if t.kind != 'i' {
			continue
		}
		switch {
		case braces > 0 || inList:
			n.labels = append(n.labels, t.text)
		case labelLists[t.text] && next == "(":
			inList = true
		case t.text == "label_values" && next == "(":
			labelValues = depth + 1
		case promqlKeywords[t.text], next == "(", labelLists[next]:
		case labelValues == depth && i > 0 && toks[i-1].text == ",":
			n.labels = append(n.labels, t.text)
		default:
			n.metrics = append(n.metrics, t.text)
		}
	}
	return n
}
