package serve

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/worldfs/worldfs/index"
)

// Session commands: what a client says to its session rather than asks
// of the views. They never reach DuckDB, so the gate does not see them:
// transactions (every statement only reads; a block's statements each
// see the catalog as it is then, as PostgreSQL's READ COMMITTED does),
// SET, RESET and SHOW of the settings below, DISCARD and DEALLOCATE.
// Anything else is SQL for the gate (DuckDB's SHOW of a table too, and a
// SET of any other setting, which the gate refuses).

// The worldfs settings of a session (README, "Serve over the PostgreSQL
// protocol").
const (
	// settingAt pins the views to one point, as worldfs sql --at: that
	// tick alone. Its value is any point index.ParseMoment takes (170,
	// head~10, a commit token, 10:00, -1m); a time is read when it is set,
	// head~N at each statement. Empty (or RESET) follows the head.
	settingAt = "worldfs.at"
	// settingUntil pins the views to the history up to a point, as
	// worldfs sql --until.
	settingUntil = "worldfs.until"
	// settingRun is the run the views show (default main).
	settingRun = "worldfs.run"
	// settingWorlds are the session's worlds, separated by commas, as the
	// database name gives them: several put each in a schema of its own
	// (worldfs sql --world given again).
	settingWorlds = "worldfs.worlds"
)

// serverVersion is the PostgreSQL version the server says it speaks
// (clients shape their catalog queries by it).
const serverVersion = "15.0 (worldfs serve)"

// settings are the PostgreSQL settings a session answers (SHOW) and takes
// (SET), by lower-case name, with their values: a client may set them,
// and only those marked take effect (statement_timeout); the others
// answer what the server does (UTF8, ISO dates, its time zone).
var settings = map[string]string{
	"application_name":                    "",
	"client_encoding":                     "UTF8",
	"datestyle":                           "ISO, MDY",
	"default_transaction_isolation":       "read committed",
	"default_transaction_read_only":       "on",
	"extra_float_digits":                  "1",
	"idle_in_transaction_session_timeout": "0",
	"in_hot_standby":                      "off",
	"integer_datetimes":                   "on",
	"intervalstyle":                       "postgres",
	"is_superuser":                        "off",
	"lc_collate":                          "C",
	"lc_ctype":                            "C",
	"lock_timeout":                        "0",
	"max_identifier_length":               "63",
	"search_path":                         `"$user", public`,
	"server_encoding":                     "UTF8",
	"server_version":                      serverVersion,
	"server_version_num":                  "150000",
	"standard_conforming_strings":         "on",
	"statement_timeout":                   "0",
	"timezone":                            "UTC",
	"transaction_isolation":               "read committed",
	"transaction_read_only":               "on",
	"bytea_output":                        "hex",
	"client_min_messages":                 "notice",
	"jit":                                 "off",
	"session_authorization":               "",
}

// readOnlySettings cannot be set.
var readOnlySettings = map[string]bool{
	"server_version": true, "server_version_num": true, "server_encoding": true, "integer_datetimes": true,
	"lc_collate": true, "lc_ctype": true, "max_identifier_length": true, "is_superuser": true, "in_hot_standby": true,
	"session_authorization": true, "transaction_read_only": true, "default_transaction_read_only": true,
}

// reportedSettings are sent to the client at startup, and again when
// set (PostgreSQL's GUC_REPORT settings), under these names.
var reportedSettings = []string{
	"application_name", "client_encoding", "DateStyle", "default_transaction_read_only", "in_hot_standby",
	"integer_datetimes", "IntervalStyle", "is_superuser", "server_encoding", "server_version",
	"session_authorization", "standard_conforming_strings", "TimeZone",
}

// cmdKind is what a session command does.
type cmdKind uint8

const (
	cmdBegin cmdKind = iota + 1
	cmdCommit
	cmdRollback
	cmdSet
	cmdReset
	cmdShow
	cmdDeallocate
	cmdNoop // accepted, nothing to do (DISCARD, SAVEPOINT, SET TRANSACTION …)
)

// command is a parsed session command.
type command struct {
	kind  cmdKind
	name  string // a setting's lower-case name; "all"
	value string // SET's value, unquoted
	def   bool   // SET … TO DEFAULT
	tag   string // its CommandComplete tag
}

// endsBlock says whether c may run in a failed transaction block.
func (c *command) endsBlock() bool { return c.kind == cmdCommit || c.kind == cmdRollback }

// words splits a command's text at white space, outside quotes.
func words(text string) []string {
	var out []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case quote != 0:
			cur.WriteByte(ch)
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
			cur.WriteByte(ch)
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		case ch == '=' || ch == ',':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			out = append(out, string(ch))
		default:
			cur.WriteByte(ch)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// parseCommand returns the session command text is, or nil if it is SQL
// (for the gate). A command it cannot take is an error.
func parseCommand(text string) (*command, error) {
	text = strings.TrimSpace(stripComments(text))
	text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
	w := words(text)
	if len(w) == 0 {
		return nil, nil
	}
	kw := strings.ToUpper(w[0])
	rest := w[1:]
	switch kw {
	case "BEGIN":
		return &command{kind: cmdBegin, tag: "BEGIN"}, nil
	case "START":
		if len(rest) > 0 && strings.EqualFold(rest[0], "TRANSACTION") {
			return &command{kind: cmdBegin, tag: "START TRANSACTION"}, nil
		}
	case "COMMIT", "END":
		if len(rest) > 0 && strings.EqualFold(rest[0], "PREPARED") {
			return nil, errorf(codeFeatureNotSupported, "worldfs serve has no prepared transactions")
		}
		return &command{kind: cmdCommit, tag: "COMMIT"}, nil
	case "ROLLBACK", "ABORT":
		if len(rest) > 0 && strings.EqualFold(rest[0], "PREPARED") {
			return nil, errorf(codeFeatureNotSupported, "worldfs serve has no prepared transactions")
		}
		for _, x := range rest {
			if strings.EqualFold(x, "TO") { // ROLLBACK TO SAVEPOINT: nothing to undo
				return &command{kind: cmdNoop, tag: "ROLLBACK"}, nil
			}
		}
		return &command{kind: cmdRollback, tag: "ROLLBACK"}, nil
	case "SAVEPOINT":
		return &command{kind: cmdNoop, tag: "SAVEPOINT"}, nil
	case "RELEASE":
		return &command{kind: cmdNoop, tag: "RELEASE"}, nil
	case "DISCARD":
		return &command{kind: cmdNoop, tag: strings.ToUpper(strings.Join(w, " "))}, nil
	case "DEALLOCATE":
		if len(rest) > 0 && strings.EqualFold(rest[0], "PREPARE") {
			rest = rest[1:]
		}
		if len(rest) != 1 {
			return nil, errorf(codeSyntax, "DEALLOCATE takes a prepared statement's name, or ALL")
		}
		if strings.EqualFold(rest[0], "ALL") {
			return &command{kind: cmdDeallocate, name: "all", tag: "DEALLOCATE ALL"}, nil
		}
		return &command{kind: cmdDeallocate, name: unquoteIdent(rest[0]), tag: "DEALLOCATE"}, nil
	case "RESET":
		if len(rest) == 0 {
			return nil, errorf(codeSyntax, "RESET takes a setting's name, or ALL")
		}
		name := settingName(strings.Join(rest, " "))
		if name != "all" {
			if err := known(name); err != nil {
				if strings.HasPrefix(name, "worldfs.") {
					return nil, err
				}
				return nil, nil // the gate's
			}
		}
		return &command{kind: cmdReset, name: name, tag: "RESET"}, nil
	case "SHOW":
		name := settingName(strings.Join(rest, " "))
		switch name {
		case "all", "transaction isolation level":
			return &command{kind: cmdShow, name: name, tag: "SHOW"}, nil
		}
		if _, ok := settings[name]; ok || strings.HasPrefix(name, "worldfs.") {
			if err := known(name); err != nil {
				return nil, err
			}
			return &command{kind: cmdShow, name: name, tag: "SHOW"}, nil
		}
		return nil, nil // DuckDB's SHOW (of tables): the gate's
	case "SET":
		return parseSet(rest)
	}
	return nil, nil
}

// parseSet parses SET's words after SET.
func parseSet(w []string) (*command, error) {
	if len(w) > 0 && (strings.EqualFold(w[0], "SESSION") || strings.EqualFold(w[0], "LOCAL")) {
		if len(w) > 1 && strings.EqualFold(w[0], "SESSION") && strings.EqualFold(w[1], "CHARACTERISTICS") {
			return &command{kind: cmdNoop, tag: "SET"}, nil
		}
		w = w[1:]
	}
	if len(w) == 0 {
		return nil, errorf(codeSyntax, "SET takes a setting and a value: SET worldfs.at = '170'")
	}
	switch strings.ToUpper(w[0]) {
	case "TRANSACTION":
		return &command{kind: cmdNoop, tag: "SET"}, nil
	case "TIME":
		if len(w) > 2 && strings.EqualFold(w[1], "ZONE") {
			return setTo("timezone", w[2:])
		}
	case "NAMES":
		return setTo("client_encoding", w[1:])
	case "SCHEMA":
		return setTo("search_path", w[1:])
	}
	if len(w) < 3 || (w[1] != "=" && !strings.EqualFold(w[1], "TO")) {
		return nil, errorf(codeSyntax, "SET takes a setting, = or TO, and a value: SET worldfs.at = '170'")
	}
	name := settingName(w[0])
	if err := known(name); err != nil {
		if strings.HasPrefix(name, "worldfs.") {
			return nil, err
		}
		return nil, nil // DuckDB's settings, and any other: the gate refuses them
	}
	if readOnlySettings[name] {
		return nil, errorf(codeFeatureNotSupported, "parameter %q cannot be changed", name)
	}
	return setTo(name, w[2:])
}

// setTo is SET name to the value words vals give (a list joined by
// commas; DEFAULT: the default).
func setTo(name string, vals []string) (*command, error) {
	if len(vals) == 1 && (strings.EqualFold(vals[0], "DEFAULT") || strings.EqualFold(vals[0], "LOCAL")) {
		return &command{kind: cmdSet, name: name, def: true, tag: "SET"}, nil
	}
	var parts []string
	for _, v := range vals {
		if v == "," {
			continue
		}
		parts = append(parts, unquote(v))
	}
	return &command{kind: cmdSet, name: name, value: strings.Join(parts, ", "), tag: "SET"}, nil
}

// known refuses a setting the session has not.
func known(name string) error {
	switch name {
	case settingAt, settingUntil, settingRun, settingWorlds:
		return nil
	}
	if _, ok := settings[name]; ok {
		return nil
	}
	if strings.HasPrefix(name, "worldfs.") {
		return &wireError{code: codeUndefinedObject, msg: fmt.Sprintf("unrecognized configuration parameter %q", name),
			hint: "worldfs serve's settings are worldfs.at, worldfs.until, worldfs.run and worldfs.worlds"}
	}
	return errorf(codeUndefinedObject, "unrecognized configuration parameter %q", name)
}

// settingName is a setting's name as typed, lower case, unquoted.
func settingName(s string) string { return strings.ToLower(unquoteIdent(strings.TrimSpace(s))) }

// unquote is a value: a string literal's text, an identifier's name, or
// the word itself.
func unquote(s string) string {
	switch {
	case len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'':
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	case len(s) >= 3 && (s[0] == 'E' || s[0] == 'e') && s[1] == '\'' && s[len(s)-1] == '\'':
		return strings.ReplaceAll(s[2:len(s)-1], "''", "'")
	}
	return unquoteIdent(s)
}

func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// stripComments removes the comments around a command (-- to the end of
// a line, /* */).
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j + 1
			b.WriteByte(' ')
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			i += j + 4
			b.WriteByte(' ')
		case s[i] == '\'':
			j := i + 1
			for j < len(s) && (s[j] != '\'' || j+1 < len(s) && s[j+1] == '\'') {
				if s[j] == '\'' {
					j++
				}
				j++
			}
			end := min(j+1, len(s))
			b.WriteString(s[i:end])
			i = end
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// setting returns the value of setting name (any case) in the session.
func (se *session) setting(name string) (string, bool) {
	n := strings.ToLower(name)
	switch n {
	case settingAt, settingUntil:
		if se.pin.m == nil || se.pin.until != (n == settingUntil) {
			return "", true
		}
		return se.pin.m.Text, true
	case settingRun:
		return se.runName, true
	case settingWorlds:
		return strings.Join(se.worlds, ","), true
	case "timezone":
		return se.srv.zone, true
	case "session_authorization":
		return se.user, true
	case "statement_timeout":
		if se.timeout == se.srv.opts.StatementTimeout {
			if v, ok := se.settings[n]; ok {
				return v, true
			}
		}
		return strconv.FormatInt(se.timeout.Milliseconds(), 10), true
	}
	if v, ok := se.settings[n]; ok {
		return v, true
	}
	v, ok := settings[n]
	return v, ok
}

// set applies SET name = value (def: to its default).
func (se *session) set(name, value string, def bool) error {
	switch name {
	case settingAt, settingUntil:
		if def || strings.TrimSpace(value) == "" {
			se.pin = pin{}
			return nil
		}
		m, err := index.ParseMoment(value, time.Now())
		if err != nil {
			return &wireError{code: codeInvalidParameter, msg: fmt.Sprintf("invalid value for %s: %v", name, err),
				hint: "SET worldfs.at = '170' (one tick), 'head~10', '10:00' or a commit token; RESET worldfs.at follows the head"}
		}
		se.pin = pin{until: name == settingUntil, m: &m}
		return nil
	case settingRun:
		if def || value == "" {
			value = se.srv.opts.Views.Run
		}
		if err := index.ValidateRunName(value); err != nil {
			return errorf(codeInvalidParameter, "invalid value for %s: %v", name, err)
		}
		se.runName = value
		return nil
	case settingWorlds:
		if def || value == "" {
			value = se.database
		}
		worlds := strings.Split(strings.ReplaceAll(value, " ", ""), ",")
		for _, w := range worlds {
			if _, err := se.srv.catalog(se.ctx, w); err != nil {
				return err
			}
		}
		se.worlds = worlds
		return nil
	case "statement_timeout":
		d := se.srv.opts.StatementTimeout
		if !def {
			v, err := parseDuration(value)
			if err != nil {
				return errorf(codeInvalidParameter, "invalid value for parameter \"statement_timeout\": %q (milliseconds, or a number and a unit: 5s, 2min)", value)
			}
			if v > 0 && v < d {
				d = v
			}
		}
		se.timeout = d
	case "client_encoding":
		switch strings.ToUpper(strings.ReplaceAll(value, "-", "")) {
		case "UTF8", "UNICODE", "SQL_ASCII", "":
		default:
			return errorf(codeFeatureNotSupported, "worldfs serve sends UTF8 only, not %s", value)
		}
		return nil // stays UTF8
	case "datestyle":
		if !def && !strings.Contains(strings.ToUpper(value), "ISO") {
			return errorf(codeFeatureNotSupported, "worldfs serve writes dates in ISO style only, not %s", value)
		}
		return nil
	case "timezone", "intervalstyle", "extra_float_digits", "bytea_output":
		return nil // what the server writes does not change; the client reads it either way
	}
	if def {
		delete(se.settings, name)
	} else {
		se.settings[name] = value
	}
	return nil
}

// parseDuration reads a PostgreSQL time setting: milliseconds, or a
// number with a unit (ms, s, min, h, d).
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	units := []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("not a duration: %q", s)
			}
			return time.Duration(f * float64(u.d)), nil
		}
	}
	return 0, fmt.Errorf("not a duration: %q", s)
}

// startupSettings applies the settings of the startup message: its own
// parameters and those of its options (-c name=value, as PGOPTIONS gives
// them). A worldfs setting that does not parse refuses the session; a
// PostgreSQL one the server cannot honour is taken as the server's.
func (se *session) startupSettings(params map[string]string) error {
	apply := func(name, value string) error {
		name = strings.ToLower(name)
		if strings.HasPrefix(name, "worldfs.") {
			if err := known(name); err != nil {
				return err
			}
			return se.set(name, value, false)
		}
		if _, ok := settings[name]; ok && !readOnlySettings[name] {
			_ = se.set(name, value, false)
		}
		return nil
	}
	for k, v := range params {
		switch k {
		case "user", "database", "options", "replication":
			continue
		}
		if err := apply(k, v); err != nil {
			return err
		}
	}
	opts := strings.Fields(params["options"])
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		switch {
		case o == "-c" && i+1 < len(opts):
			i++
			o = opts[i]
		case strings.HasPrefix(o, "-c"):
			o = o[2:]
		case strings.HasPrefix(o, "--"):
			o = o[2:]
		default:
			continue
		}
		name, value, ok := strings.Cut(o, "=")
		if !ok {
			continue
		}
		if err := apply(strings.ReplaceAll(name, "-", "_"), value); err != nil {
			return err
		}
	}
	return nil
}

// command runs a session command; simple: of a simple query (whose SHOW
// describes its row first).
func (se *session) command(c *command, simple bool) error {
	switch c.kind {
	case cmdBegin:
		if se.tx != 'I' {
			se.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "25001", Message: "there is already a transaction in progress"})
		} else {
			se.tx = 'T'
		}
	case cmdCommit, cmdRollback:
		if se.tx == 'I' {
			se.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "25P01", Message: "there is no transaction in progress"})
		}
		tag := c.tag
		if se.tx == 'E' {
			tag = "ROLLBACK"
		}
		se.tx = 'I'
		se.closePortals()
		se.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
		return nil
	case cmdSet:
		if err := se.set(c.name, c.value, c.def); err != nil {
			return err
		}
		se.reported(c.name)
	case cmdReset:
		names := []string{c.name}
		if c.name == "all" {
			names = []string{settingAt, settingRun, settingWorlds, "statement_timeout"}
			for n := range se.settings {
				names = append(names, n)
			}
		}
		for _, n := range names {
			if err := se.set(n, "", true); err != nil {
				return err
			}
			se.reported(n)
		}
	case cmdShow:
		return se.show(c, simple)
	case cmdDeallocate:
		if c.name == "all" {
			clear(se.stmts)
		} else {
			delete(se.stmts, c.name)
		}
	}
	se.send(&pgproto3.CommandComplete{CommandTag: []byte(c.tag)})
	return nil
}

// reported sends a reported setting's new value.
func (se *session) reported(name string) {
	for _, r := range reportedSettings {
		if strings.EqualFold(r, name) {
			v, _ := se.setting(name)
			se.send(&pgproto3.ParameterStatus{Name: r, Value: v})
		}
	}
}

// rowDescription is the row a command answers with (SHOW), or nil.
func (c *command) rowDescription() *pgproto3.RowDescription {
	if c.kind != cmdShow {
		return nil
	}
	names := []string{c.name}
	switch c.name {
	case "all":
		names = []string{"name", "setting", "description"}
	case "transaction isolation level":
		names = []string{"transaction_isolation"}
	}
	fields := make([]pgproto3.FieldDescription, len(names))
	for i, n := range names {
		fields[i] = textType.field(n, pgtype.TextFormatCode)
	}
	return &pgproto3.RowDescription{Fields: fields}
}

// show answers SHOW.
func (se *session) show(c *command, simple bool) error {
	if simple {
		se.send(c.rowDescription())
	}
	var rows [][]string
	switch c.name {
	case "all":
		names := []string{settingAt, settingUntil, settingRun, settingWorlds}
		for n := range settings {
			names = append(names, n)
		}
		for _, n := range names {
			v, _ := se.setting(n)
			rows = append(rows, []string{n, v, ""})
		}
	case "transaction isolation level":
		rows = [][]string{{"read committed"}}
	default:
		v, _ := se.setting(c.name)
		rows = [][]string{{v}}
	}
	for _, r := range rows {
		vals := make([][]byte, len(r))
		for i, v := range r {
			vals[i] = []byte(v)
		}
		se.send(&pgproto3.DataRow{Values: vals})
	}
	se.send(&pgproto3.CommandComplete{CommandTag: fmt.Appendf(nil, "SHOW")})
	return nil
}
