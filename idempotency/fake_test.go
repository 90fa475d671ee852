package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// fakeDB is an in-memory idempotency.DynamoDBAPI of one table with hash key
// id. It evaluates the condition and update expressions it is given (the
// small subset the package uses: OR, AND, parentheses, attribute_exists,
// attribute_not_exists, comparisons, SET) and, like DynamoDB, refuses a
// request that uses a placeholder it does not define or defines one it does
// not use. It is safe for concurrent use.
type fakeDB struct {
	t     *testing.T
	table string

	// noOldItem makes a failed condition return no item, as dynalite does
	// (it ignores ReturnValuesOnConditionCheckFailure).
	noOldItem bool
	// fail, when set, is asked before every call (without the lock held);
	// a non-nil error is returned instead, wrapped as the SDK wraps it.
	fail func(op string, id string) error
	// lose, when set, is asked after every write the fake applied; when it
	// returns true the write's answer is lost: the fake evaluates the same
	// request again, as the SDK's retryer sends it after a timeout, a reset
	// connection or a 500, and answers what that attempt gets.
	lose func(op string, id string) bool
	// unanswered, when set, is asked after every write the fake applied;
	// a non-nil error is returned instead of the answer (the call ran out
	// of its deadline after the service applied it; no retry was sent).
	unanswered func(op string, id string) error

	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
	calls []string
}

func newFakeDB(t *testing.T) *fakeDB {
	return &fakeDB{t: t, table: "idempotency", items: map[string]map[string]types.AttributeValue{}}
}

// item returns a copy of id's item, or nil.
func (f *fakeDB) item(id string) map[string]types.AttributeValue {
	f.mu.Lock()
	defer f.mu.Unlock()
	if it, ok := f.items[id]; ok {
		return maps.Clone(it)
	}
	return nil
}

// put stores an item as is.
func (f *fakeDB) put(item map[string]types.AttributeValue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[item["id"].(*types.AttributeValueMemberS).Value] = maps.Clone(item)
}

// ids returns the ids stored, sorted.
func (f *fakeDB) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.items))
}

// callLog returns the operations called so far.
func (f *fakeDB) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func sdkWrap(op string, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}

// begin records the call, checks the table and asks fail.
func (f *fakeDB) begin(op string, table *string, key map[string]types.AttributeValue) (string, error) {
	id := ""
	if s, ok := key["id"].(*types.AttributeValueMemberS); ok {
		id = s.Value
	}
	f.mu.Lock()
	f.calls = append(f.calls, op)
	f.mu.Unlock()
	if aws.ToString(table) != f.table {
		return id, sdkWrap(op, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")})
	}
	if id == "" {
		return id, sdkWrap(op, fmt.Errorf("fake: %s without an id", op))
	}
	if f.fail != nil {
		if err := f.fail(op, id); err != nil {
			return id, sdkWrap(op, err)
		}
	}
	return id, nil
}

func (f *fakeDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	id, err := f.begin("GetItem", in.TableName, in.Key)
	if err != nil {
		return nil, err
	}
	if !aws.ToBool(in.ConsistentRead) {
		f.t.Errorf("GetItem of %s is not a consistent read", id)
	}
	return &dynamodb.GetItemOutput{Item: f.item(id)}, nil
}

// lost reports whether the answer of the write op of id, applied, is lost.
func (f *fakeDB) lost(op, id string) bool {
	return f.lose != nil && f.lose(op, id)
}

func (f *fakeDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	id, err := f.begin("PutItem", in.TableName, in.Item)
	if err != nil {
		return nil, err
	}
	out, err := f.putItem(id, in)
	if err == nil && f.lost("PutItem", id) {
		return f.putItem(id, in)
	}
	if err == nil && f.unanswered != nil {
		if uerr := f.unanswered("PutItem", id); uerr != nil {
			return nil, sdkWrap("PutItem", uerr)
		}
	}
	return out, err
}

func (f *fakeDB) putItem(id string, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.items[id]
	ok, err := f.condition(aws.ToString(in.ConditionExpression), "", in.ExpressionAttributeNames, in.ExpressionAttributeValues, old)
	if err != nil {
		return nil, sdkWrap("PutItem", err)
	}
	if !ok {
		return nil, sdkWrap("PutItem", f.refused(old, in.ReturnValuesOnConditionCheckFailure))
	}
	f.items[id] = maps.Clone(in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

func (f *fakeDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	id, err := f.begin("UpdateItem", in.TableName, in.Key)
	if err != nil {
		return nil, err
	}
	out, err := f.updateItem(id, in)
	if err == nil && f.lost("UpdateItem", id) {
		return f.updateItem(id, in)
	}
	return out, err
}

func (f *fakeDB) updateItem(id string, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.items[id]
	update := aws.ToString(in.UpdateExpression)
	ok, err := f.condition(aws.ToString(in.ConditionExpression), update, in.ExpressionAttributeNames, in.ExpressionAttributeValues, old)
	if err != nil {
		return nil, sdkWrap("UpdateItem", err)
	}
	if !ok {
		return nil, sdkWrap("UpdateItem", f.refused(old, in.ReturnValuesOnConditionCheckFailure))
	}
	next := maps.Clone(old)
	if next == nil {
		next = maps.Clone(in.Key)
	}
	set, found := strings.CutPrefix(update, "SET ")
	if !found {
		return nil, sdkWrap("UpdateItem", fmt.Errorf("fake: update %q is not a SET", update))
	}
	for _, a := range strings.Split(set, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(a), " = ")
		if !ok {
			return nil, sdkWrap("UpdateItem", fmt.Errorf("fake: update %q", update))
		}
		next[in.ExpressionAttributeNames[name]] = in.ExpressionAttributeValues[value]
	}
	f.items[id] = next
	return &dynamodb.UpdateItemOutput{}, nil
}

func (f *fakeDB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	id, err := f.begin("DeleteItem", in.TableName, in.Key)
	if err != nil {
		return nil, err
	}
	out, err := f.deleteItem(id, in)
	if err == nil && f.lost("DeleteItem", id) {
		return f.deleteItem(id, in)
	}
	return out, err
}

func (f *fakeDB) deleteItem(id string, in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.items[id]
	ok, err := f.condition(aws.ToString(in.ConditionExpression), "", in.ExpressionAttributeNames, in.ExpressionAttributeValues, old)
	if err != nil {
		return nil, sdkWrap("DeleteItem", err)
	}
	if !ok {
		return nil, sdkWrap("DeleteItem", f.refused(old, in.ReturnValuesOnConditionCheckFailure))
	}
	delete(f.items, id)
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *fakeDB) refused(old map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld && !f.noOldItem {
		e.Item = maps.Clone(old)
	}
	return e
}

var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// condition checks the placeholders of cond and update against names and
// values, and evaluates cond on item (true when cond is empty).
func (f *fakeDB) condition(cond, update string, names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) (bool, error) {
	used := map[string]bool{}
	for _, p := range placeholder.FindAllString(cond+" "+update, -1) {
		used[p] = true
		_, isName := names[p]
		_, isValue := values[p]
		if !isName && !isValue {
			return false, fmt.Errorf("fake: ValidationException: %s is not defined", p)
		}
	}
	for n := range names {
		if !used[n] {
			return false, fmt.Errorf("fake: ValidationException: name %s is not used", n)
		}
	}
	for v := range values {
		if !used[v] {
			return false, fmt.Errorf("fake: ValidationException: value %s is not used", v)
		}
	}
	if cond == "" {
		return true, nil
	}
	p := &parser{toks: tokenize(cond), names: names, values: values, item: item}
	ok, err := p.or()
	if err == nil && p.i != len(p.toks) {
		err = fmt.Errorf("fake: trailing %q in condition %q", p.toks[p.i:], cond)
	}
	return ok, err
}

var token = regexp.MustCompile(`attribute_not_exists|attribute_exists|OR|AND|[#:][A-Za-z0-9_]+|<=|>=|<>|[()=<>]`)

func tokenize(s string) []string { return token.FindAllString(s, -1) }

// parser evaluates a condition expression.
type parser struct {
	toks   []string
	i      int
	names  map[string]string
	values map[string]types.AttributeValue
	item   map[string]types.AttributeValue
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *parser) next() string { t := p.peek(); p.i++; return t }

func (p *parser) or() (bool, error) {
	v, err := p.and()
	for err == nil && p.peek() == "OR" {
		p.next()
		var w bool
		w, err = p.and()
		v = v || w
	}
	return v, err
}

func (p *parser) and() (bool, error) {
	v, err := p.factor()
	for err == nil && p.peek() == "AND" {
		p.next()
		var w bool
		w, err = p.factor()
		v = v && w
	}
	return v, err
}

func (p *parser) factor() (bool, error) {
	switch t := p.next(); t {
	case "(":
		v, err := p.or()
		if err == nil && p.next() != ")" {
			err = errors.New("fake: missing )")
		}
		return v, err
	case "attribute_exists", "attribute_not_exists":
		if p.next() != "(" {
			return false, errors.New("fake: want (")
		}
		name := p.names[p.next()]
		if p.next() != ")" {
			return false, errors.New("fake: want )")
		}
		_, ok := p.item[name]
		return ok == (t == "attribute_exists"), nil
	default:
		left, lok := p.operand(t)
		op := p.next()
		right, rok := p.operand(p.next())
		if !lok || !rok {
			return false, nil // a missing attribute compares false
		}
		c, err := compare(left, right)
		if err != nil {
			return false, err
		}
		switch op {
		case "=":
			return c == 0, nil
		case "<>":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		case ">=":
			return c >= 0, nil
		}
		return false, fmt.Errorf("fake: operator %q", op)
	}
}

func (p *parser) operand(t string) (types.AttributeValue, bool) {
	if strings.HasPrefix(t, ":") {
		v, ok := p.values[t]
		return v, ok
	}
	v, ok := p.item[p.names[t]]
	return v, ok
}

func compare(a, b types.AttributeValue) (int, error) {
	switch x := a.(type) {
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, errors.New("fake: comparing a number with another type")
		}
		m, err1 := strconv.ParseInt(x.Value, 10, 64)
		n, err2 := strconv.ParseInt(y.Value, 10, 64)
		if err1 != nil || err2 != nil {
			return 0, errors.New("fake: not a whole number")
		}
		return cmpInt(m, n), nil
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, errors.New("fake: comparing a string with another type")
		}
		return strings.Compare(x.Value, y.Value), nil
	}
	return 0, fmt.Errorf("fake: cannot compare %T", a)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
