def test_the_server_answers(steward, live):
    org = steward.organization.get()
    assert org["organization_id"] == live.org_id
    assert org["name"] == "Python client"
