package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// DynamoDBAPI is the part of the DynamoDB client that a Handler uses.
// *dynamodb.Client satisfies it; tests may pass a fake.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Attribute names of the table: those of AWS Lambda Powertools' idempotency
// utility (its defaults), so that one table serves both.
const (
	attrID                   = "id"                     // S, the partition key: prefix#key
	attrExpiration           = "expiration"             // N, epoch seconds; the table's TTL attribute
	attrInProgressExpiration = "in_progress_expiration" // N, epoch milliseconds
	attrStatus               = "status"                 // S, INPROGRESS or COMPLETED
	attrData                 = "data"                   // S, the stored result: {"outcome":"ack"} ...
	attrValidation           = "validation"             // S, hex SHA-256 of the payload (WithPayloadValidation)
	// attrClaimToken is not Powertools': a random token unique to the
	// claim that wrote the item (kept by its completion), by which a
	// claim, completion or release whose answer was lost recognises its
	// own write.
	attrClaimToken = "claim_token" // S
)

// Values of the status attribute, as Powertools writes them.
const (
	statusInProgress = "INPROGRESS"
	statusCompleted  = "COMPLETED"
)

// Expressions. The claim is Powertools' condition: the id is new, or its
// item expired, or it is a claim whose in-progress expiry passed. A claim's
// in_progress_expiration is its fencing token: a later claim of the same id
// can only succeed once it has passed (or the whole item expired, and the
// in-progress expiry is never longer than the TTL), so the later claim's
// value is always greater, and the completion and release of a claim are
// conditional on the value they wrote.
const (
	claimCondition = "attribute_not_exists(#id) OR #expiration < :now OR (#status = :inprogress AND #in_progress_expiration < :now_ms)"
	ownCondition   = "#status = :inprogress AND #in_progress_expiration = :claim"
	completeUpdate = "SET #status = :completed, #expiration = :expiration, #data = :data"
)

// errClaimLost is the cause of a completion or release whose condition
// failed: the item is no longer the claim this run wrote.
var errClaimLost = errors.New("the claim was taken over or removed (its in-progress expiry passed)")

// record is an item of the table, decoded.
type record struct {
	status               string
	expiration           int64 // epoch seconds
	inProgressExpiration int64 // epoch milliseconds; 0 when absent
	data                 string
	validation           string
	token                string // the claim's token; "" on an item of Powertools or of an older version
}

// result is what the data attribute of a completed item holds: the
// outcome kind the handler returned and, for a drop, its reason.
type result struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// maxReason bounds the drop reason stored in data.
const maxReason = 1024

// store makes the calls on one table.
type store struct {
	client DynamoDBAPI
	table  string
}

func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

func keyOf(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrID: str(id)}
}

// claimOf is one claim of an id: its token (crypto/rand.Text, new for each
// claim) and its in-progress expiry (epoch milliseconds), the fencing token
// of its completion and release.
type claimOf struct {
	token string
	ms    int64
}

// claim writes an INPROGRESS item for id with the claim c, that expires
// (TTL) at expiration (epoch seconds), on Powertools' condition evaluated
// at now. When the condition fails it returns claimed false and the item
// that stood in the way (nil when the service did not return it; the
// caller reads it then). The caller recognises its own claim in that item
// (ownClaim): the claim was applied and its answer lost.
func (s *store) claim(ctx context.Context, id string, now time.Time, expiration int64, c claimOf, validation string) (claimed bool, old *record, err error) {
	item := keyOf(id)
	item[attrExpiration] = number(expiration)
	item[attrInProgressExpiration] = number(c.ms)
	item[attrStatus] = str(statusInProgress)
	item[attrClaimToken] = str(c.token)
	if validation != "" {
		item[attrValidation] = str(validation)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String(claimCondition),
		ExpressionAttributeNames: map[string]string{
			"#id": attrID, "#expiration": attrExpiration, "#status": attrStatus, "#in_progress_expiration": attrInProgressExpiration,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": number(now.Unix()), ":now_ms": number(now.UnixMilli()), ":inprogress": str(statusInProgress),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, nil, nil
	}
	var refused *types.ConditionalCheckFailedException
	if !errors.As(err, &refused) {
		return false, nil, s.fail(opClaim, id, err)
	}
	if len(refused.Item) == 0 {
		return false, nil, nil
	}
	r, derr := decode(refused.Item)
	if derr != nil {
		return false, nil, storeError(opClaim, id, derr)
	}
	return false, r, nil
}

// get reads id's item with a consistent read; nil when there is none.
func (s *store) get(ctx context.Context, id string) (*record, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, s.fail(opRead, id, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	r, err := decode(out.Item)
	if err != nil {
		return nil, storeError(opRead, id, err)
	}
	return r, nil
}

// ownClaim reports whether r is the item the claim c wrote with expiration
// and validation: the claim was applied, though its answer said otherwise
// (it was lost, and the SDK's retry of the PutItem found the claim in
// place). The token is new for each claim and written only by it, so no
// other claim's item carries it.
func ownClaim(r *record, c claimOf, expiration int64, validation string) bool {
	return r.token == c.token && r.status == statusInProgress && r.inProgressExpiration == c.ms &&
		r.expiration == expiration && r.validation == validation
}

// complete turns the claim c of id into a COMPLETED item that expires at
// expiration, holding res. When its condition fails it reads the item (as
// the exception returns it, or with a consistent GetItem) and succeeds
// when the item is this very completion (its answer was lost and the SDK's
// retry found the item completed): COMPLETED, with c's token, expiration
// and res.
func (s *store) complete(ctx context.Context, id string, c claimOf, expiration int64, res result) error {
	data, err := json.Marshal(res)
	if err != nil {
		return storeError(opComplete, id, err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 keyOf(id),
		UpdateExpression:    aws.String(completeUpdate),
		ConditionExpression: aws.String(ownCondition),
		ExpressionAttributeNames: map[string]string{
			"#status": attrStatus, "#expiration": attrExpiration, "#data": attrData, "#in_progress_expiration": attrInProgressExpiration,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":completed": str(statusCompleted), ":expiration": number(expiration), ":data": str(string(data)),
			":inprogress": str(statusInProgress), ":claim": number(c.ms),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	r, rerr := s.refusedItem(ctx, opComplete, id, err)
	if rerr != nil {
		return rerr
	}
	if r != nil && r.token == c.token && r.status == statusCompleted && r.expiration == expiration && r.data == string(data) {
		return nil // this completion, applied; its answer was lost
	}
	return s.fail(opComplete, id, err)
}

// release deletes the claim c of id, so that the record's next delivery
// runs the handler at once. When its condition fails it reads the item (as
// the exception returns it, or with a consistent GetItem) and succeeds when
// no claim of c is left to delete: the item is gone (this delete was
// applied and its answer lost, or the item expired) or belongs to a later
// claim (which could only be made once c was deleted or had expired).
func (s *store) release(ctx context.Context, id string, c claimOf) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyOf(id),
		ConditionExpression:      aws.String(ownCondition),
		ExpressionAttributeNames: map[string]string{"#status": attrStatus, "#in_progress_expiration": attrInProgressExpiration},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":inprogress": str(statusInProgress), ":claim": number(c.ms),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	r, rerr := s.refusedItem(ctx, opRelease, id, err)
	if rerr != nil {
		return rerr
	}
	if r == nil || r.token != c.token {
		return nil // nothing of c is left
	}
	return s.fail(opRelease, id, err)
}

// refusedItem returns the item that made the condition of op on id fail
// with err, a ConditionalCheckFailedException: the one the exception
// carries (ReturnValuesOnConditionCheckFailure ALL_OLD), else the one a
// consistent GetItem reads (dynalite returns none); nil when there is
// none. When err is another error, or the item cannot be read or decoded,
// it returns the error to report.
func (s *store) refusedItem(ctx context.Context, op, id string, err error) (*record, error) {
	var refused *types.ConditionalCheckFailedException
	if !errors.As(err, &refused) {
		return nil, s.fail(op, id, err)
	}
	if len(refused.Item) > 0 {
		r, derr := decode(refused.Item)
		if derr != nil {
			return nil, storeError(op, id, derr)
		}
		return r, nil
	}
	r, gerr := s.get(ctx, id)
	if gerr != nil {
		return nil, storeError(op, id, fmt.Errorf("%w (%w); reading the item back: %w", errClaimLost, err, gerr))
	}
	return r, nil
}

// fail returns the error of op on id for err, the error of a DynamoDB
// call, by its kind (awserr.Classify): it matches ErrStore; a missing table
// matches ErrTableNotFound too (and names the command that creates it); a
// failed condition says the claim was lost.
func (s *store) fail(op, id string, err error) error {
	e := &awserr.Error{Pkg: "idempotency", Op: op, Resource: id, Kind: awserr.Classify(err), Cause: err, Sentinels: &storeErrs, Also: ErrStore}
	switch e.Kind {
	case awserr.ConditionFailed:
		e.Cause = fmt.Errorf("%w: %w", errClaimLost, err)
	case awserr.NotFound:
		e.Hint = "create it with: bootstrap idempotency init -table " + s.table
	}
	return e
}

// decode returns the record in an item, or an error naming the attribute
// that is missing or malformed. Only status and expiration are required.
func decode(item map[string]types.AttributeValue) (*record, error) {
	var r record
	var err error
	if r.status, err = stringAttr(item, attrStatus, true); err != nil {
		return nil, err
	}
	if r.expiration, err = numberAttr(item, attrExpiration, true); err != nil {
		return nil, err
	}
	if r.inProgressExpiration, err = numberAttr(item, attrInProgressExpiration, false); err != nil {
		return nil, err
	}
	if r.data, err = stringAttr(item, attrData, false); err != nil {
		return nil, err
	}
	if r.validation, err = stringAttr(item, attrValidation, false); err != nil {
		return nil, err
	}
	if r.token, err = stringAttr(item, attrClaimToken, false); err != nil {
		return nil, err
	}
	return &r, nil
}

func stringAttr(item map[string]types.AttributeValue, name string, required bool) (string, error) {
	v, ok := item[name]
	if !ok {
		if required {
			return "", fmt.Errorf("item without %s", name)
		}
		return "", nil
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s is not a string", name)
	}
	return s.Value, nil
}

func numberAttr(item map[string]types.AttributeValue, name string, required bool) (int64, error) {
	v, ok := item[name]
	if !ok {
		if required {
			return 0, fmt.Errorf("item without %s", name)
		}
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is not a number", name)
	}
	// Powertools writes whole numbers; accept a decimal point anyway.
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.Value, 64)
		if ferr != nil {
			return 0, fmt.Errorf("attribute %s: %q is not a number", name, n.Value)
		}
		i = int64(f)
	}
	return i, nil
}
