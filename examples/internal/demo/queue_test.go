package demo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestQueueDeliversInOrderAndDropsAfterClose(t *testing.T) {
	var got []int
	q := NewQueue(8, func(v int) { got = append(got, v) })
	for i := range 5 {
		q.Send(i)
	}
	q.Close(5 * time.Second)
	q.Send(99) // closed: dropped, no panic
	q.Close(time.Second)
	assert.Equal(t, []int{0, 1, 2, 3, 4}, got)
}
