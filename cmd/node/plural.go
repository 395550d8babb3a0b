package main

import "fmt"

// messages is n with the word for it: "1 message", "2 messages".
func messages[N ~int | ~int64 | ~uint64](n N) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}
