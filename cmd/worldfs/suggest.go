package main

import (
	"fmt"
	"slices"
	"strings"
)

// didYouMean is `; did you mean "X"?` for the candidate closest to word,
// or "" when none is close (a message that goes on after it starts a
// sentence: "…; did you mean "X"? Its tables: …"): a command, flag, world or table name typed
// with a letter or two wrong, missing, extra or swapped. The one copy of
// the CLI's suggestions.
func didYouMean(word string, candidates []string) string {
	if c := closest(word, candidates); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// closest returns the candidate nearest word by edit distance, if it is
// within a third of word's length (at least 1, at most 3), the first in
// candidates' order on a tie; "" if none is.
func closest(word string, candidates []string) string {
	limit := min(3, max(1, len(word)/3))
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == word {
			continue
		}
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of two neighbours each
// cost 1 (Damerau's typing mistakes).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// orStop is didYouMean, or a full stop when there is nothing to suggest:
// what ends a sentence that more follows.
func orStop(word string, candidates []string) string {
	if s := didYouMean(word, candidates); s != "" {
		return s
	}
	return "."
}

// quotedAll is names quoted, sorted, joined by commas: a list for an
// error message.
func quotedAll(names []string) string {
	out := slices.Clone(names)
	slices.Sort(out)
	for i, n := range out {
		out[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(out, ", ")
}
