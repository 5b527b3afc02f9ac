package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// SQLSTATEs the server answers with (PostgreSQL's, Appendix A).
const (
	codeInsufficientPrivilege = "42501" // the gate's refusals
	codeSyntax                = "42601"
	codeUndefinedTable        = "42P01"
	codeUndefinedFunction     = "42883"
	codeUndefinedColumn       = "42703"
	codeUndefinedObject       = "42704" // an unknown setting
	codeAccessRule            = "42000"
	codeDataException         = "22000"
	codeInvalidText           = "22P02"
	codeOutOfRange            = "22003"
	codeDivisionByZero        = "22012"
	codeInvalidParameter      = "22023"
	codeFeatureNotSupported   = "0A000"
	codeQueryCanceled         = "57014"
	codeIdleSessionTimeout    = "57P05"
	codeAdminShutdown         = "57P01"
	codeOutOfMemory           = "53200"
	codeTooManyConnections    = "53300"
	codeProtocolViolation     = "08P01"
	codeInvalidPassword       = "28P01"
	codeInvalidAuthorization  = "28000"
	codeNoDatabase            = "3D000"
	codeInFailedTransaction   = "25P02"
	codeInvalidPortal         = "34000"
	codeInvalidStatement      = "26000"
	codeDataCorrupted         = "XX001"
	codeIOError               = "58030"
	codeInternal              = "XX000"
)

// wireError is an error with the SQLSTATE and the hint a client gets.
type wireError struct {
	code, msg, hint string
}

func (e *wireError) Error() string { return e.msg }

func errorf(code, format string, args ...any) *wireError {
	return &wireError{code: code, msg: fmt.Sprintf(format, args...)}
}

// Why a statement was stopped (context.Cause of its context).
var (
	errUserCancel       = errors.New("canceling statement due to user request")
	errStatementTimeout = errors.New("canceling statement due to statement timeout")
	errClientGone       = errors.New("the client closed the connection")
)

// response is the ErrorResponse a client gets for err. The message is
// the error's own (the gate's refusals word for word).
func (s *Server) response(err error, severity string) *pgproto3.ErrorResponse {
	code, msg, hint := classify(err, s.opts.QueryMemory)
	return &pgproto3.ErrorResponse{Severity: severity, SeverityUnlocalized: severity, Code: code, Message: msg, Hint: hint}
}

// classify returns err's SQLSTATE, message and hint.
func classify(err error, queryMemory int64) (code, msg, hint string) {
	var we *wireError
	var nw *noWorldError
	var de *duckdb.Error
	var lost *sql.LostFileError
	switch {
	case errors.As(err, &we):
		return we.code, we.msg, we.hint
	case errors.Is(err, errUserCancel), errors.Is(err, errStatementTimeout):
		if errors.Is(err, errStatementTimeout) {
			return codeQueryCanceled, errStatementTimeout.Error(), "worldfs serve --statement-timeout bounds every statement; SET statement_timeout lowers it for a session"
		}
		return codeQueryCanceled, errUserCancel.Error(), ""
	case errors.Is(err, sql.ErrNotReadOnly):
		return codeInsufficientPrivilege, err.Error(), ""
	case errors.As(err, &nw):
		return codeNoDatabase, nw.Error(), "the database names a world (psql -d WORLD); worldfs worlds lists them"
	case errors.As(err, &lost), errors.Is(err, bucket.ErrCorruption), errors.Is(err, index.ErrCorrupt):
		return codeDataCorrupted, err.Error(), "worldfs check --read-data names what is lost"
	case errors.Is(err, sql.ErrNotFound):
		return codeInvalidParameter, err.Error(), ""
	case errors.As(err, &de):
		return duckCode(de, queryMemory)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return codeQueryCanceled, err.Error(), ""
	}
	return codeInternal, err.Error(), ""
}

// duckCode is the SQLSTATE of a DuckDB error.
func duckCode(e *duckdb.Error, queryMemory int64) (code, msg, hint string) {
	msg = e.Msg
	switch e.Type {
	case duckdb.ErrorTypeParser, duckdb.ErrorTypeSyntax:
		return codeSyntax, msg, ""
	case duckdb.ErrorTypeCatalog:
		if strings.Contains(msg, "Function") || strings.Contains(msg, "function") || strings.Contains(msg, "Macro") {
			return codeUndefinedFunction, msg, ""
		}
		return codeUndefinedTable, msg, ""
	case duckdb.ErrorTypeBinder:
		if strings.Contains(msg, "not found") && strings.Contains(msg, "olumn") {
			return codeUndefinedColumn, msg, ""
		}
		if strings.Contains(msg, "No function matches") {
			return codeUndefinedFunction, msg, ""
		}
		return codeAccessRule, msg, ""
	case duckdb.ErrorTypeConversion, duckdb.ErrorTypeInvalidInput:
		return codeInvalidText, msg, ""
	case duckdb.ErrorTypeOutOfRange:
		return codeOutOfRange, msg, ""
	case duckdb.ErrorTypeDivideByZero:
		return codeDivisionByZero, msg, ""
	case duckdb.ErrorTypeOutOfMemory:
		return codeOutOfMemory, msg, fmt.Sprintf("a statement of worldfs serve may hold %s (--query-memory); narrow the query (a tick, fewer columns, LIMIT) or raise the limit", bytesText(queryMemory))
	case duckdb.ErrorTypeInterrupt:
		return codeQueryCanceled, msg, ""
	case duckdb.ErrorTypeIO:
		return codeIOError, msg, ""
	case duckdb.ErrorTypeNotImplemented:
		return codeFeatureNotSupported, msg, ""
	case duckdb.ErrorTypePermission:
		return codeInsufficientPrivilege, msg, ""
	case duckdb.ErrorTypeParameterNotResolved, duckdb.ErrorTypeParameterNotAllowed, duckdb.ErrorTypeMismatchType, duckdb.ErrorTypeInvalidType:
		return codeDataException, msg, ""
	}
	return codeInternal, msg, ""
}

// bytesText is n bytes for people: 1 GiB, 256 MiB.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
