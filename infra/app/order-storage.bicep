// A further storage account for orders (StateStoreAccounts, docs/state-store.md "Accounts"):
// Table Storage only, hardened like the main account (no shared keys, TLS 1.2), and reached by the
// app's identity alone: Table Data Contributor for the app, Table Data Reader for the optional user.
param name string
param location string
param tags object
param appPrincipalId string
param userPrincipalId string = ''
@allowed(['User', 'ServicePrincipal', 'Group'])
param userPrincipalType string = 'User'

// Built-in role definition ids, checked against the Azure built-in roles reference.
var roles = {
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  storageTableDataReader: '76199698-9eea-4c19-bc75-cec21354c6b6'
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    dnsEndpointType: 'Standard'
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource appTables 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, appPrincipalId, roles.storageTableDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource userTables 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(userPrincipalId)) {
  name: guid(storage.id, userPrincipalId, roles.storageTableDataReader)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataReader)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}

output name string = storage.name
output tableServiceUri string = storage.properties.primaryEndpoints.table
