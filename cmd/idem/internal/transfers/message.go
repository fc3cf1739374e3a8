package transfers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idem/inbox"
)

// maxMessageID bounds the message id a transfer records, in bytes.
const maxMessageID = 1024

// ApplyMessage is an inbox.Handler that applies one transfer command: the
// message's body is the JSON of POST /transfers ({"from","to","amount"}),
// applied as POST /transfers applies it, through the inbox's transaction
// that ctx carries, so that the transfer and the message id commit
// together. The transfer records m.ID as its message_id.
//
// A command that can never succeed is refused with inbox.Refuse before
// anything is written, so that the inbox settles it: a body over 1 MiB,
// malformed JSON (trailing data included), an invalid account id, an
// unknown account, a non-positive amount, a transfer to the same account,
// insufficient funds, a credit past the largest balance, and a message id
// that is not valid UTF-8, holds a NUL or is longer than 1024 bytes. Any
// other error (the database failed, or the work outlasted
// Config.RequestTimeout) has the message delivered again.
func (s *Service) ApplyMessage(ctx context.Context, m *inbox.Message) error {
	q, ok := s.db.current(ctx)
	if !ok {
		return errors.New("transfers: ApplyMessage runs inside inbox.Process on the ledger's store: the context carries no transaction of it")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	return s.applyMessage(ctx, q, m)
}

// applyMessage applies m through q.
func (s *Service) applyMessage(ctx context.Context, q querier, m *inbox.Message) error {
	in, no := decodeCommand(m)
	if no == nil {
		var err error
		if _, no, err = s.transfer(ctx, q, in, origin{messageID: m.ID}); err != nil {
			return err
		}
	}
	if no != nil {
		return inbox.Refuse(no)
	}
	return nil
}

// decodeCommand validates a transfer command as validateTransfer does a
// POST /transfers, and its message id as a transfer can record it.
func decodeCommand(m *inbox.Message) (transferRequest, *declined) {
	var in transferRequest
	switch {
	case !utf8.ValidString(m.ID) || strings.ContainsRune(m.ID, 0) || len(m.ID) > maxMessageID:
		return in, &declined{"invalid-message-id", "Invalid message id",
			fmt.Sprintf("a message id is valid UTF-8 without NUL, at most %d bytes", maxMessageID)}
	case len(m.Body) > maxBody:
		return in, &declined{"request-too-large", "Request too large", fmt.Sprintf("the body must not exceed %d bytes", maxBody)}
	}
	if err := json.Unmarshal(m.Body, &in); err != nil {
		return in, &declined{"malformed-json", "Malformed JSON", bounded(err.Error())}
	}
	if !validAccountID(in.From) || !validAccountID(in.To) {
		return in, &declined{"invalid-account-id", "Invalid account id", "from and to must be account ids: " + invalidIDDetail}
	}
	return in, nil
}

// bounded cuts s to maxDetail bytes on a character boundary, as problem
// does.
func bounded(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
