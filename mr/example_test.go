package mr_test

import (
	"errors"
	"fmt"

	"github.com/goroce/goroce/mr"
)

// A host registers a buffer for remote writes and hands (Addr, RKey) to its
// peer; the NIC then checks every incoming RDMA WRITE against the table.
func Example() {
	tab, _ := mr.NewTable(mr.Limits{})
	pd, _ := tab.AllocPD()
	buf := make([]byte, 1024)
	m, err := pd.RegMR(buf, mr.AccessLocalWrite|mr.AccessRemoteWrite)
	if err != nil {
		fmt.Println(err)
		return
	}

	// An RDMA WRITE of 5 bytes at offset 16, arriving on QP 0x11.
	dst, err := tab.CheckRemote(pd, m.RKey(), m.Addr()+16, 5, mr.AccessRemoteWrite, 0x11)
	if err != nil {
		fmt.Println(err)
		return
	}
	copy(dst, "hello")
	fmt.Println(string(buf[16:21]))

	// A peer asking to read gets a remote access error.
	_, err = tab.CheckRemote(pd, m.RKey(), m.Addr(), 8, mr.AccessRemoteRead, 0x11)
	fmt.Println(errors.Is(err, mr.ErrAccessDenied))

	// Remote write needs local write.
	_, err = pd.RegMR(buf, mr.AccessRemoteWrite)
	fmt.Println(err)
	// Output:
	// hello
	// true
	// mr: access REMOTE_WRITE: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE (ibv_reg_mr fails with EINVAL): invalid access flags
}
