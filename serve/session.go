package serve

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/worldfs/worldfs/sql"
)

// A session is one client's connection after its startup: the
// PostgreSQL protocol's simple and extended query flows over the views of
// its worlds (docs/INTERNALS.md, "serve").
//
// One goroutine reads the client's messages (read), copying each, so
// that a client that closes its connection stops the statement it runs
// at once; the session's own goroutine (run) answers them in order.
// Backend's reading and writing share no state, so the two use it side
// by side.
type session struct {
	srv *Server
	// immutable after startup
	conn           net.Conn
	be             *pgproto3.Backend
	enc            *encoder
	pid            int32
	secret         []byte
	user, database string

	// ctx ends when the session does: the client went, the server
	// closed, or the session ended.
	ctx  context.Context
	stop context.CancelCauseFunc
	in   chan received

	mu struct {
		sync.Mutex
		// running stops the statement running, if one is (a cancel
		// request, the statement timeout).
		running context.CancelCauseFunc
	}

	// The rest is the session goroutine's.
	worlds   []string
	runName  string
	pin      pin
	settings map[string]string // what the client set, by lower-case name
	timeout  time.Duration     // statement_timeout: at most the server's
	tx       byte              // 'I' idle, 'T' in a transaction block, 'E' in a failed one
	skip     bool              // an extended-protocol error: messages are ignored until Sync
	stmts    map[string]*prepared
	portals  map[string]*portal
	held     *held // the database the session holds between statements
	unsent   int   // bytes sent since the last flush
	results  int   // the results the session made (their tables' names)
}

// received is a message the reader copied, or the error that ended its
// reading.
type received struct {
	msg pgproto3.FrontendMessage
	err error
}

// held is a database of the session's views.
type held struct {
	v    *views
	db   *dbsql.DB
	busy bool // a suspended portal's rows are open on it
}

func newSession(s *Server, c net.Conn, be *pgproto3.Backend, user, database string) *session {
	ctx, stop := context.WithCancelCause(context.Background())
	return &session{
		srv: s, conn: c, be: be, enc: newEncoder(), user: user, database: database,
		ctx: ctx, stop: stop, in: make(chan received, 64),
		runName: s.opts.Views.Run, settings: map[string]string{}, timeout: s.opts.StatementTimeout, tx: 'I',
		stmts: map[string]*prepared{}, portals: map[string]*portal{},
	}
}

// run answers the client's messages until it terminates, goes, or
// idles past the idle timeout.
func (se *session) run() {
	go se.read()
	idle := time.NewTimer(se.srv.opts.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case r := <-se.in:
			if r.err != nil {
				if !isEOF(r.err) {
					se.fatal(errorf(codeProtocolViolation, "invalid message: %v", r.err))
				}
				return
			}
			if !se.handle(r.msg) {
				return
			}
			if !idle.Stop() {
				select {
				case <-idle.C:
				default:
				}
			}
			idle.Reset(se.srv.opts.IdleTimeout)
		case <-idle.C:
			se.fatal(&wireError{code: codeIdleSessionTimeout, msg: "terminating connection due to idle-session timeout",
				hint: fmt.Sprintf("worldfs serve --idle-timeout %s closes a session that sends nothing for that long", se.srv.opts.IdleTimeout)})
			return
		case <-se.ctx.Done():
			if errors.Is(context.Cause(se.ctx), errClosed) {
				se.fatal(errorf(codeAdminShutdown, "terminating connection due to administrator command (worldfs serve is shutting down)"))
			}
			return
		}
	}
}

// read copies the client's messages to se.in, until the connection
// fails: a client gone stops the session (and what it runs).
func (se *session) read() {
	se.be.SetMaxBodyLen(maxMessage)
	for {
		msg, err := se.be.Receive()
		if err == nil {
			msg, err = own(msg)
		}
		if err != nil {
			if isEOF(err) {
				se.stop(errClientGone)
			}
			select {
			case se.in <- received{err: err}:
			case <-se.ctx.Done():
			}
			return
		}
		select {
		case se.in <- received{msg: msg}:
		case <-se.ctx.Done():
			return
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return
		}
	}
}

// own returns a copy of msg that the next Receive does not overwrite.
func own(msg pgproto3.FrontendMessage) (pgproto3.FrontendMessage, error) {
	switch m := msg.(type) {
	case *pgproto3.Query:
		c := *m
		return &c, nil
	case *pgproto3.Parse:
		c := *m
		c.ParameterOIDs = append([]uint32(nil), m.ParameterOIDs...)
		return &c, nil
	case *pgproto3.Bind:
		c := *m
		c.ParameterFormatCodes = append([]int16(nil), m.ParameterFormatCodes...)
		c.ResultFormatCodes = append([]int16(nil), m.ResultFormatCodes...)
		c.Parameters = make([][]byte, len(m.Parameters))
		for i, p := range m.Parameters {
			if p != nil {
				c.Parameters[i] = append([]byte{}, p...)
			}
		}
		return &c, nil
	case *pgproto3.Describe:
		c := *m
		return &c, nil
	case *pgproto3.Execute:
		c := *m
		return &c, nil
	case *pgproto3.Close:
		c := *m
		return &c, nil
	case *pgproto3.Sync:
		return &pgproto3.Sync{}, nil
	case *pgproto3.Flush:
		return &pgproto3.Flush{}, nil
	case *pgproto3.Terminate:
		return &pgproto3.Terminate{}, nil
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail, *pgproto3.FunctionCall:
		return msg, nil // answered without reading them
	}
	return nil, fmt.Errorf("unexpected message %T", msg)
}

// close releases what the session holds.
func (se *session) close() {
	for name := range se.portals {
		se.closePortal(name)
	}
	if h := se.held; h != nil {
		se.held = nil
		h.v.Release(h.db, true)
	}
	se.stop(errClientGone)
}

// handle answers one message; false ends the session.
func (se *session) handle(msg pgproto3.FrontendMessage) bool {
	switch m := msg.(type) {
	case *pgproto3.Query:
		se.skip = false
		se.simple(m.String)
		se.ready()
	case *pgproto3.Sync:
		se.skip = false
		if se.tx == 'I' {
			se.closePortals()
		}
		se.ready()
	case *pgproto3.Flush:
		se.flush()
	case *pgproto3.Terminate:
		return false
	case *pgproto3.FunctionCall:
		se.send(se.srv.response(errorf(codeFeatureNotSupported, "worldfs serve answers no function calls"), "ERROR"))
		se.ready()
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		// No COPY is ever started (the gate refuses it): nothing to do.
	default:
		if se.skip {
			return true
		}
		var err error
		switch m := msg.(type) {
		case *pgproto3.Parse:
			err = se.parse(m)
		case *pgproto3.Bind:
			err = se.bind(m)
		case *pgproto3.Describe:
			err = se.describe(m)
		case *pgproto3.Execute:
			err = se.executeMsg(m)
		case *pgproto3.Close:
			if m.ObjectType == 'S' {
				delete(se.stmts, m.Name)
			} else {
				se.closePortal(m.Name)
			}
			se.send(&pgproto3.CloseComplete{})
		}
		if err != nil {
			se.failed(err)
			se.skip = true
		}
	}
	return se.ctx.Err() == nil
}

// send queues msg for the client.
func (se *session) send(msg pgproto3.BackendMessage) {
	se.be.Send(msg)
	se.unsent += 64 // a message's framing, roughly; rows count their values
}

// flush sends what is queued, waiting at most the idle timeout for a
// client that reads nothing.
func (se *session) flush() error {
	se.conn.SetWriteDeadline(time.Now().Add(se.srv.opts.IdleTimeout))
	se.unsent = 0
	if err := se.be.Flush(); err != nil {
		se.stop(errClientGone)
		return err
	}
	return nil
}

// ready ends a query cycle.
func (se *session) ready() {
	se.send(&pgproto3.ReadyForQuery{TxStatus: se.tx})
	se.flush()
}

// failed answers an error of a statement: a transaction block fails
// with it.
func (se *session) failed(err error) {
	se.send(se.srv.response(err, "ERROR"))
	if se.tx == 'T' {
		se.tx = 'E'
	}
}

// fatal answers an error that ends the session.
func (se *session) fatal(err error) {
	se.send(se.srv.response(err, "FATAL"))
	se.flush()
}

// notice sends a notice of the views (a tick that is not visible, …).
func (se *session) notices(text string) {
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line = strings.TrimPrefix(line, "note: "); line != "" {
			se.send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: line})
		}
	}
}

// errInFailed refuses a statement in a failed transaction block.
var errInFailed = &wireError{code: codeInFailedTransaction, msg: "current transaction is aborted, commands ignored until end of transaction block"}

// simple answers a simple query: its statements in order, each checked
// before any runs; the first error ends it.
func (se *session) simple(text string) {
	pieces := sql.Split(text)
	if len(pieces) == 0 {
		se.send(&pgproto3.EmptyQueryResponse{})
		return
	}
	cmds := make([]*command, len(pieces))
	mixed := false
	for i, p := range pieces {
		c, err := parseCommand(p)
		if err != nil {
			se.failed(err)
			return
		}
		if c == nil {
			pieces[i] = pgDialect(p)
		}
		cmds[i] = c
		if c != nil && len(pieces) > 1 {
			mixed = true
		}
	}
	if se.tx == 'E' && (cmds[0] == nil || !cmds[0].endsBlock()) {
		se.failed(errInFailed)
		return
	}
	// Every statement is checked before any runs: a query that holds one
	// the gate refuses runs nothing.
	if cmds[0] == nil || mixed {
		var texts []string
		for i, p := range pieces {
			if cmds[i] == nil {
				texts = append(texts, p)
			}
		}
		if len(texts) > 0 {
			if err := se.precheck(texts, !mixed && len(texts) == len(pieces), pgDialect(text)); err != nil {
				se.failed(err)
				return
			}
		}
	}
	for i, p := range pieces {
		if c := cmds[i]; c != nil {
			if err := se.command(c, true); err != nil {
				se.failed(err)
				return
			}
			continue
		}
		pr := &prepared{text: p}
		po := &portal{p: pr}
		err := se.execute(po, 0, true)
		se.endPortal(po)
		if err != nil {
			se.failed(err)
			return
		}
	}
}

// precheck runs the gate on the statements texts of a query before any
// runs; whole: they are the query (text), checked as one.
func (se *session) precheck(texts []string, whole bool, text string) error {
	h, err := se.hold(se.ctx)
	if err != nil {
		return err
	}
	defer se.unhold(h, true)
	conn, err := h.db.Conn(se.ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if whole {
		texts = []string{text}
	}
	for _, t := range texts {
		ctx, mapErr := sql.WithErrors(se.ctx)
		if _, err := sql.Check(ctx, conn, t); err != nil {
			return mapErr(err)
		}
	}
	return nil
}

// prepared is a statement of the extended protocol (or of a simple
// query's: text alone).
type prepared struct {
	text  string
	cmd   *command // a session command (nil: SQL)
	empty bool
	// params are the parameters' types; cols and types the result's
	// columns as the gate prepared them at Parse.
	params []uint32
	cols   []sql.Column
	types  []wireType
	// projectable: the result can be projected (sql.Statement.Projectable);
	// else its values are sent as text as the driver gives them.
	projectable bool
}

// portal is a prepared statement bound to parameters and result formats,
// with its rows once it runs.
type portal struct {
	p       *prepared
	args    []any
	formats []int16 // per column; none: all text

	// Once running:
	started bool
	ctx     context.Context
	cancel  context.CancelCauseFunc
	mapErr  func(error) error
	h       *held
	conn    *dbsql.Conn
	rows    rowSource
	types   []wireType
	vals    []any
	ptrs    []any
	buf     []byte
	offs    []int
	row     [][]byte
	plans   []plan
	peeked  bool // rows.Next returned a row not yet sent
	sent    int64
	ok      bool // ended cleanly: its database may be kept
}

func (po *portal) format(i int) int16 {
	switch len(po.formats) {
	case 0:
		return pgtype.TextFormatCode
	case 1:
		return po.formats[0]
	}
	return po.formats[i]
}

// parse answers Parse: a statement the gate admits (or a session
// command), its parameters typed as DuckDB prepared it.
func (se *session) parse(m *pgproto3.Parse) error {
	if se.tx == 'E' {
		if c, _ := parseCommand(m.Query); c == nil || !c.endsBlock() {
			return errInFailed
		}
	}
	pieces := sql.Split(m.Query)
	pr := &prepared{text: m.Query}
	switch {
	case len(pieces) == 0:
		pr.empty = true
	case len(pieces) > 1:
		return errorf(codeSyntax, "cannot insert multiple commands into a prepared statement")
	default:
		c, err := parseCommand(pieces[0])
		if err != nil {
			return err
		}
		pr.cmd = c
		if c == nil {
			pr.text = pgDialect(m.Query)
		}
	}
	if !pr.empty && pr.cmd == nil {
		if err := se.check(pr, m.ParameterOIDs); err != nil {
			return err
		}
	}
	se.stmts[m.Name] = pr
	se.send(&pgproto3.ParseComplete{})
	return nil
}

// check runs the gate on pr's text, and types its parameters and
// columns.
func (se *session) check(pr *prepared, given []uint32) error {
	h, err := se.hold(se.ctx)
	if err != nil {
		return err
	}
	defer se.unhold(h, true)
	conn, err := h.db.Conn(se.ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, mapErr := sql.WithErrors(se.ctx)
	stmts, err := sql.Check(ctx, conn, pr.text)
	if err != nil {
		return mapErr(err)
	}
	st := stmts[0]
	pr.cols, pr.projectable = st.Columns, st.Projectable()
	if pr.projectable {
		pr.types = resultTypes(st.Columns)
	} else {
		pr.types = make([]wireType, len(st.Columns))
		for i := range pr.types {
			pr.types[i] = textType
		}
	}
	// The statement's parameters, as DuckDB types them (preparing one
	// statement the gate admitted runs nothing: the gate prepares it too).
	var types []duckdb.Type
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return errors.New("the DuckDB connection cannot prepare statements")
		}
		ps, err := pc.PrepareContext(ctx, st.Text)
		if err != nil {
			return err
		}
		defer ps.Close()
		ds, ok := ps.(*duckdb.Stmt)
		if !ok {
			return errors.New("the DuckDB statement has no parameter types")
		}
		for i := range ds.NumInput() {
			t, err := ds.ParamType(i + 1)
			if err != nil {
				t = duckdb.TYPE_INVALID
			}
			types = append(types, t)
		}
		return nil
	})
	if err != nil {
		return mapErr(err)
	}
	if len(types) > 0 && pr.projectable && slices.ContainsFunc(st.Columns, func(c sql.Column) bool { return c.Type == nil }) {
		// Columns that only the parameters' values tell (a table macro's of
		// a parameter): described as the statement binds with NULLs.
		if err := se.probe(ctx, conn, pr, st.Text, types); err != nil {
			return mapErr(err)
		}
	}
	pr.params = make([]uint32, len(types))
	for i, t := range types {
		if i < len(given) && given[i] != 0 {
			pr.params[i] = given[i]
		} else {
			pr.params[i] = paramOID(t)
		}
	}
	return nil
}

// probe describes pr's columns as text binds with parameters of types:
// its result of no rows (LIMIT 0), checked by the gate as a statement of
// its own. Each parameter is its type's zero (a number's 0, which a
// macro of the views binds as a tick whether or not it is visible, where
// NULL would leave it no file to read; DuckDB's untyped parameter too),
// NULL where its type has none.
func (se *session) probe(ctx context.Context, conn *dbsql.Conn, pr *prepared, text string, types []duckdb.Type) error {
	q := "SELECT * FROM (" + text + "\n) AS worldfs_probe LIMIT 0"
	if _, err := sql.Check(ctx, conn, q); err != nil {
		return err
	}
	args := make([]any, len(types))
	for i, t := range types {
		switch paramOID(t) {
		case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.NumericOID:
			args[i] = int64(0)
		case pgtype.Float4OID, pgtype.Float8OID:
			args[i] = float64(0)
		case pgtype.BoolOID:
			args[i] = false
		case pgtype.TextOID:
			if t == duckdb.TYPE_INVALID || t == duckdb.TYPE_ANY {
				args[i] = int64(0)
			} else {
				args[i] = ""
			}
		}
	}
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return err
	}
	pr.cols, pr.types = make([]sql.Column, len(cts)), make([]wireType, len(cts))
	for i, ct := range cts {
		pr.cols[i] = sql.Column{Name: ct.Name()}
		pr.types[i] = typeOfName(ct.DatabaseTypeName())
	}
	return rows.Err()
}

// bind answers Bind: a portal of a prepared statement with its
// parameters.
func (se *session) bind(m *pgproto3.Bind) error {
	pr, ok := se.stmts[m.PreparedStatement]
	if !ok {
		return errorf(codeInvalidStatement, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if se.tx == 'E' && (pr.cmd == nil || !pr.cmd.endsBlock()) {
		return errInFailed
	}
	if len(m.Parameters) != len(pr.params) {
		return errorf(codeProtocolViolation, "bind message supplies %d parameters, but prepared statement %q requires %d", len(m.Parameters), m.PreparedStatement, len(pr.params))
	}
	if n := len(m.ResultFormatCodes); n > 1 && n != len(pr.types) {
		return errorf(codeProtocolViolation, "bind message has %d result formats but query has %d columns", n, len(pr.types))
	}
	for _, f := range m.ResultFormatCodes {
		if f != pgtype.TextFormatCode && f != pgtype.BinaryFormatCode {
			return errorf(codeProtocolViolation, "unsupported format code: %d", f)
		}
	}
	args := make([]any, len(m.Parameters))
	for i, data := range m.Parameters {
		format := int16(pgtype.TextFormatCode)
		switch n := len(m.ParameterFormatCodes); {
		case n == 1:
			format = m.ParameterFormatCodes[0]
		case n > 1 && i < n:
			format = m.ParameterFormatCodes[i]
		}
		v, err := decodeParam(se.enc.m, pr.params[i], format, data)
		if err != nil {
			return errorf(codeInvalidParameter, "parameter $%d: %v", i+1, err)
		}
		args[i] = v
	}
	se.closePortal(m.DestinationPortal)
	se.portals[m.DestinationPortal] = &portal{p: pr, args: args, formats: m.ResultFormatCodes}
	se.send(&pgproto3.BindComplete{})
	return nil
}

// describe answers Describe of a statement (its parameters and columns)
// or a portal (its columns, in its formats).
func (se *session) describe(m *pgproto3.Describe) error {
	var pr *prepared
	var po *portal
	if m.ObjectType == 'S' {
		var ok bool
		if pr, ok = se.stmts[m.Name]; !ok {
			return errorf(codeInvalidStatement, "prepared statement %q does not exist", m.Name)
		}
		se.send(&pgproto3.ParameterDescription{ParameterOIDs: pr.params})
	} else {
		var ok bool
		if po, ok = se.portals[m.Name]; !ok {
			return errorf(codeInvalidPortal, "portal %q does not exist", m.Name)
		}
		pr = po.p
	}
	if pr.cmd != nil {
		if rd := pr.cmd.rowDescription(); rd != nil {
			se.send(rd)
			return nil
		}
	}
	if pr.cmd != nil || pr.empty || len(pr.types) == 0 {
		se.send(&pgproto3.NoData{})
		return nil
	}
	fields := make([]pgproto3.FieldDescription, len(pr.types))
	for i, t := range pr.types {
		f := int16(pgtype.TextFormatCode)
		if po != nil {
			f = po.format(i)
		}
		fields[i] = t.field(pr.cols[i].Name, f)
	}
	se.send(&pgproto3.RowDescription{Fields: fields})
	return nil
}

// executeMsg answers Execute: the portal's rows, up to MaxRows (0: all),
// then CommandComplete, or PortalSuspended while rows remain.
func (se *session) executeMsg(m *pgproto3.Execute) error {
	po, ok := se.portals[m.Portal]
	if !ok {
		return errorf(codeInvalidPortal, "portal %q does not exist", m.Portal)
	}
	pr := po.p
	switch {
	case pr.empty:
		se.send(&pgproto3.EmptyQueryResponse{})
		return nil
	case pr.cmd != nil:
		return se.command(pr.cmd, false)
	}
	if se.tx == 'E' {
		return errInFailed
	}
	err := se.execute(po, int64(m.MaxRows), false)
	if err != nil || !po.peeked {
		se.closePortal(m.Portal)
	}
	return err
}

// statement sets po running: the statement's context, timeout and
// cancel, its database and its rows.
func (se *session) start(po *portal, describe bool) error {
	po.started = true
	po.ctx, po.mapErr = sql.WithErrors(po.ctx)
	h, err := se.hold(po.ctx)
	if err != nil {
		return err
	}
	po.h = h
	if po.conn, err = h.db.Conn(po.ctx); err != nil {
		return err
	}
	pr := po.p
	stmts, err := sql.Check(po.ctx, po.conn, pr.text)
	if err != nil {
		return po.mapErr(err)
	}
	if len(stmts) != 1 {
		return errorf(codeSyntax, "cannot insert multiple commands into a prepared statement")
	}
	st := stmts[0]
	if pr.types == nil { // a simple query's: typed now
		pr.cols, pr.projectable = st.Columns, st.Projectable()
		pr.types = resultTypes(st.Columns)
		if !pr.projectable {
			for i := range pr.types {
				pr.types[i] = textType
			}
		}
	}
	var notes bytes.Buffer
	if err := sql.Notes(po.ctx, po.conn, stmts, &notes); err != nil {
		return po.mapErr(err)
	}
	se.notices(notes.String())
	if pr.projectable {
		exprs := make([]string, len(pr.types))
		for i, t := range pr.types {
			exprs[i] = fmt.Sprintf("%s AS c%d", t.expr(i+1, po.format(i)), i+1)
		}
		q, err := sql.Project(po.ctx, po.conn, st, 1, exprs)
		if err != nil {
			return po.mapErr(err)
		}
		se.results++
		rows, err := newResult(po.ctx, po.conn, fmt.Sprintf("%s%d", resultPrefix, se.results), q, po.args, len(exprs))
		if err != nil {
			return po.mapErr(err)
		}
		po.rows = rows
	} else {
		rows, err := po.conn.QueryContext(po.ctx, st.Text, po.args...)
		if err != nil {
			return po.mapErr(err)
		}
		po.rows = rows
	}
	if describe {
		if len(pr.types) == 0 {
			se.send(&pgproto3.NoData{})
		} else {
			fields := make([]pgproto3.FieldDescription, len(pr.types))
			for i, t := range pr.types {
				fields[i] = t.field(pr.cols[i].Name, po.format(i))
			}
			se.send(&pgproto3.RowDescription{Fields: fields})
		}
	}
	n := len(pr.types)
	po.types = pr.types
	po.vals, po.ptrs = make([]any, n), make([]any, n)
	for i := range po.vals {
		po.ptrs[i] = &po.vals[i]
	}
	po.offs, po.row, po.plans = make([]int, n+1), make([][]byte, n), make([]plan, n)
	return nil
}

// flushBytes is how much of a result the server queues before it sends
// it: rows go out batch by batch as the client reads them.
const flushBytes = 64 << 10

// execute runs po (starting it if it has not started) and sends up to
// maxRows of its rows (0: all); describe: a simple query's, whose
// RowDescription comes first. The statement timeout and a cancel request
// stop it.
func (se *session) execute(po *portal, maxRows int64, describe bool) (err error) {
	if po.ctx == nil {
		po.ctx, po.cancel = context.WithCancelCause(se.ctx)
	}
	se.mu.Lock()
	se.mu.running = po.cancel
	se.mu.Unlock()
	timer := time.AfterFunc(se.timeout, func() { po.cancel(errStatementTimeout) })
	defer func() {
		timer.Stop()
		se.mu.Lock()
		se.mu.running = nil
		se.mu.Unlock()
	}()
	if !po.started {
		if h := se.srv.hooks.started; h != nil {
			h()
		}
		if err := se.start(po, describe); err != nil {
			return se.stopped(po, err)
		}
	}
	var n int64
	for {
		if maxRows > 0 && n == maxRows {
			if po.peeked = po.rows.Next(); po.peeked {
				se.send(&pgproto3.PortalSuspended{})
				return nil
			}
			break
		}
		if !po.peeked && !po.rows.Next() {
			break
		}
		po.peeked = false
		if err := po.rows.Scan(po.ptrs...); err != nil {
			return se.stopped(po, err)
		}
		if h := se.srv.hooks.pulled; h != nil {
			h(po.sent + 1)
		}
		if err := se.sendRow(po); err != nil {
			return se.stopped(po, err)
		}
		n++
		if se.unsent >= flushBytes {
			if err := se.flush(); err != nil {
				return se.stopped(po, err)
			}
		}
	}
	if err := po.rows.Err(); err != nil {
		return se.stopped(po, err)
	}
	if err := po.ctx.Err(); err != nil {
		return se.stopped(po, err)
	}
	po.ok = true
	se.send(&pgproto3.CommandComplete{CommandTag: fmt.Appendf(nil, "%s %d", tagOf(po.p), po.sent)})
	return nil
}

// tagOf is the command tag of a statement's completion.
func tagOf(pr *prepared) string {
	if pr.cols != nil && !pr.projectable && strings.HasPrefix(strings.ToUpper(strings.TrimSpace(pr.text)), "EXPLAIN") {
		return "EXPLAIN"
	}
	return "SELECT"
}

// stopped is err, a statement's, as the client is told it: why its
// context ended (a cancel, the timeout, the client gone) before what
// DuckDB said of it.
func (se *session) stopped(po *portal, err error) error {
	if po.ctx != nil && po.ctx.Err() != nil {
		if cause := context.Cause(po.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
	}
	if po.mapErr != nil {
		return po.mapErr(err)
	}
	return err
}

// sendRow sends po's current row.
func (se *session) sendRow(po *portal) error {
	buf := po.buf[:0]
	for i, v := range po.vals {
		po.offs[i] = len(buf)
		if v == nil {
			po.offs[i] = -1
			continue
		}
		if !po.p.projectable {
			v = textOf(v)
		}
		var err error
		if buf, err = se.enc.append(buf, &po.plans[i], po.types[i], po.format(i), v); err != nil {
			return fmt.Errorf("column %s: %w", po.p.cols[i].Name, err)
		}
	}
	po.buf = buf
	for i := range po.vals {
		if po.offs[i] < 0 {
			po.row[i] = nil
			continue
		}
		end := len(buf)
		for j := i + 1; j < len(po.vals); j++ {
			if po.offs[j] >= 0 {
				end = po.offs[j]
				break
			}
		}
		po.row[i] = buf[po.offs[i]:end]
	}
	se.be.Send(&pgproto3.DataRow{Values: po.row})
	se.unsent += len(buf) + 4*len(po.row) + 7
	po.sent++
	return nil
}

// textOf is a value of a statement whose result is not projected
// (EXPLAIN, PRAGMA: text, numbers and booleans) as text.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case bool:
		if x {
			return "t"
		}
		return "f"
	}
	return fmt.Sprint(v)
}

// endPortal releases what po holds: its rows, its connection, its
// database (kept by the session if po ended cleanly).
func (se *session) endPortal(po *portal) {
	if po.rows != nil {
		po.rows.Close()
		po.rows = nil
	}
	if po.conn != nil {
		po.conn.Close()
		po.conn = nil
	}
	if po.cancel != nil {
		po.cancel(context.Canceled)
	}
	if po.h != nil {
		se.unhold(po.h, po.ok || !po.started)
		po.h = nil
	}
}

func (se *session) closePortal(name string) {
	if po, ok := se.portals[name]; ok {
		delete(se.portals, name)
		se.endPortal(po)
	}
}

// closePortals closes every portal, as a transaction's end does.
func (se *session) closePortals() {
	for name := range se.portals {
		se.closePortal(name)
	}
}

// hold returns a database of the session's views as they are now: the
// one the session holds if it is of them and free, else one acquired
// (kept by the session if it holds none).
func (se *session) hold(ctx context.Context) (*held, error) {
	v, err := se.srv.viewsOf(ctx, se.worlds, se.runName, se.pin)
	if err != nil {
		return nil, err
	}
	if h := se.held; h != nil && !h.busy {
		if h.v == v {
			h.busy = true
			return h, nil
		}
		se.held = nil
		h.v.Release(h.db, true)
	}
	db, err := v.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	h := &held{v: v, db: db, busy: true}
	if se.held == nil {
		se.held = h
	}
	return h, nil
}

// unhold gives h back: the session keeps its own; another goes back to
// its views. ok: its statement ended cleanly (a database whose statement
// was stopped is closed: it may still be busy).
func (se *session) unhold(h *held, ok bool) {
	h.busy = false
	if h == se.held {
		if ok {
			return
		}
		se.held = nil
	}
	h.v.Release(h.db, ok)
}

// cancelStatement stops the statement the session runs, if any (a
// cancel request).
func (se *session) cancelStatement() {
	se.mu.Lock()
	running := se.mu.running
	se.mu.Unlock()
	if running != nil {
		running(errUserCancel)
	}
}
