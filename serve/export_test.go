package serve

// Hooks of the tests: each, if set, hears of a statement starting to run,
// of a session ending, and of the rows a statement pulled from DuckDB
// (counted as it pulls each).
func (s *Server) SetHooks(started, ended func(), pulled func(rows int64)) {
	s.hooks.started, s.hooks.ended, s.hooks.pulled = started, ended, pulled
}
