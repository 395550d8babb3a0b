package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// UserInfoSubject is where a client asks the server who it authenticated
// it as (every account imports it from the system account).
const UserInfoSubject = "$SYS.REQ.USER.INFO"

// Identity is who the server says a connection is.
type Identity struct {
	User    string // the user name, a JWT's name, or the nkey
	Account string
}

// WhoAmI asks the server who nc is authenticated as. A server without
// users answers with an empty User.
func WhoAmI(ctx context.Context, nc *nats.Conn) (Identity, error) {
	m, err := nc.RequestWithContext(ctx, UserInfoSubject, nil)
	if err != nil {
		return Identity{}, fmt.Errorf("ask the server who this connection is (%s): %w", UserInfoSubject, err)
	}
	var resp struct {
		Data struct {
			User     string `json:"user"`
			UserName string `json:"user_name"`
			Account  string `json:"account"`
		} `json:"data"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return Identity{}, fmt.Errorf("%s: %w", UserInfoSubject, err)
	}
	if resp.Error != nil {
		return Identity{}, fmt.Errorf("%s: %w", UserInfoSubject, errors.New(resp.Error.Description))
	}
	id := Identity{User: resp.Data.UserName, Account: resp.Data.Account}
	if id.User == "" {
		id.User = resp.Data.User
	}
	return id, nil
}
