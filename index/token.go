package index

import "strings"

// BatchOf names the batch a claim's token belongs to: the part before its
// last ".", or the token itself (a claim alone, as every claim before
// batching was). A batch's fragments are named by the batch
// (FragmentPath), each of its claims by a token of its own.
func BatchOf(token string) string {
	if i := strings.LastIndexByte(token, '.'); i > 0 {
		return token[:i]
	}
	return token
}
